//! Runs plan commands and records what it did.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::plan::Cmd;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("`{cmd}` failed: {stderr}")]
    Failed { cmd: String, stderr: String },
    #[error("cannot run `{program}`: {source} (is it installed?)")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// Runs one command; its stderr becomes the error text.
pub fn run(cmd: &Cmd) -> Result<String, ExecError> {
    use std::os::unix::process::CommandExt as _;
    let argv = cmd.full_argv();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        // Its own process group: a signal to ours (Ctrl-C, `timeout`, a closed terminal) must
        // not kill `ip netns add` half way, leaving a namespace entry nobody can tear down;
        // qbench takes the signal and tears down what was built.
        .process_group(0)
        .stdin(if cmd.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ExecError::Spawn {
            program: argv[0].clone(),
            source,
        })?;
    if let (Some(input), Some(mut pipe)) = (&cmd.stdin, child.stdin.take()) {
        let _ = pipe.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|source| ExecError::Spawn {
            program: argv[0].clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(ExecError::Failed {
            cmd: cmd.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr)
                .trim()
                .replace('\n', "; "),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs commands in order, recording each one that succeeded.
#[derive(Debug, Default)]
pub struct Executor {
    pub done: Vec<String>,
}

impl Executor {
    pub fn run_all(&mut self, cmds: &[Cmd]) -> Result<(), ExecError> {
        for c in cmds {
            run(c)?;
            self.done.push(c.to_string());
        }
        Ok(())
    }
}
