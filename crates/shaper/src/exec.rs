//! Runs plan commands and records what it did.
//!
//! A plan is written as the commands a person would type (`--dry-run` prints them), but a link
//! is built from about a hundred of them, and starting a program is the slow part: a few
//! milliseconds each here, about half a second each in an emulated machine. So the executor
//! runs the plan's meaning with fewer programs: sysctls and namespace deletion are done in
//! place (`inplace`), a command inside a namespace is started from a thread that entered it
//! rather than through `ip netns exec`, and consecutive `ip -n NS` commands go to one
//! `ip -batch`.

mod inplace;

use std::io::Write;
use std::process::{Command, Stdio};

use crate::cmd::is_plain_word;
use crate::plan::Cmd;

pub use inplace::read_sysctl;

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
    if let Some(done) = inplace::try_run(cmd) {
        return done.map(|()| String::new());
    }
    let shown = cmd.to_string();
    let start = || spawn(&cmd.argv, cmd.stdin.as_deref(), &shown);
    match &cmd.ns {
        Some(ns) => in_netns(ns, &shown, start),
        None => start(),
    }
}

/// A program's standard output, run in `ns`; `None` when it cannot be started or fails.
pub fn output_in(ns: &str, argv: &[&str]) -> Option<String> {
    let cmd = Cmd::new(Some(ns), argv);
    run(&cmd).ok()
}

/// `f`'s result, run on a thread that entered `ns` first: what it starts is inside `ns`.
pub(crate) fn in_netns<T: Send>(
    ns: &str,
    shown: &str,
    f: impl FnOnce() -> Result<T, ExecError> + Send,
) -> Result<T, ExecError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            crate::netns::enter(ns).map_err(|e| ExecError::Failed {
                cmd: shown.to_string(),
                stderr: e.to_string(),
            })?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(ExecError::Failed {
                cmd: shown.to_string(),
                stderr: "the thread that ran it panicked".into(),
            })
        })
    })
}

fn spawn(argv: &[String], stdin: Option<&str>, shown: &str) -> Result<String, ExecError> {
    use std::os::unix::process::CommandExt as _;
    let Some((program, args)) = argv.split_first() else {
        return Err(ExecError::Failed {
            cmd: shown.to_string(),
            stderr: "empty command".into(),
        });
    };
    let mut child = Command::new(program)
        .args(args)
        // Its own process group: a signal to ours (Ctrl-C, `timeout`, a closed terminal) must
        // not kill `ip netns add` half way, leaving a namespace entry nobody can tear down;
        // qbench takes the signal and tears down what was built.
        .process_group(0)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ExecError::Spawn {
            program: program.clone(),
            source,
        })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|source| ExecError::Spawn {
            program: program.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(ExecError::Failed {
            cmd: shown.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr)
                .trim()
                .replace('\n', "; "),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The namespace of an `ip -n NS ...` command that `ip -batch` can take: run from the root
/// namespace, not about namespaces themselves, and no argument the batch reader would split
/// or read as a comment.
fn batchable(cmd: &Cmd) -> Option<&str> {
    let [ip, n, ns, object, ..] = cmd.argv.as_slice() else {
        return None;
    };
    (cmd.ns.is_none()
        && cmd.stdin.is_none()
        && ip == "ip"
        && n == "-n"
        && object != "netns"
        && cmd.argv.iter().all(|a| is_plain_word(a)))
    .then_some(ns.as_str())
}

/// The line of a failed batch that `ip` names ("Command failed -:N", counted from 1).
fn failed_line(stderr: &str) -> Option<usize> {
    let at = stderr.find("Command failed -:")? + "Command failed -:".len();
    let digits: String = stderr[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|n| *n >= 1)
}

/// The plan cut where the executor starts a program: a run of `ip -n NS` commands of one
/// namespace, or one command.
fn groups(cmds: &[Cmd]) -> impl Iterator<Item = &[Cmd]> {
    let mut rest = cmds;
    std::iter::from_fn(move || {
        let first = rest.first()?;
        let len = match batchable(first) {
            Some(ns) => rest.iter().take_while(|c| batchable(c) == Some(ns)).count(),
            None => 1,
        };
        let (now, after) = rest.split_at(len);
        rest = after;
        Some(now)
    })
}

/// How many programs the executor starts to run `cmds`.
pub fn programs(cmds: &[Cmd]) -> usize {
    groups(cmds)
        .filter(|g| g.len() > 1 || !inplace::is_inplace(&g[0]))
        .count()
}

/// Runs commands in order, recording each one that succeeded.
#[derive(Debug, Default)]
pub struct Executor {
    pub done: Vec<String>,
}

impl Executor {
    pub fn run_all(&mut self, cmds: &[Cmd]) -> Result<(), ExecError> {
        for group in groups(cmds) {
            if let [one] = group {
                run(one)?;
                self.done.push(one.to_string());
            } else {
                self.batch(group)?;
            }
        }
        Ok(())
    }

    /// Commands of one namespace through one `ip -batch`; a failure names the command that
    /// failed and records those before it as done.
    fn batch(&mut self, cmds: &[Cmd]) -> Result<(), ExecError> {
        let ns = &cmds[0].argv[2];
        let lines: String = cmds.iter().map(|c| c.argv[3..].join(" ") + "\n").collect();
        let argv: Vec<String> = ["ip", "-n", ns, "-batch", "-"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        match spawn(&argv, Some(&lines), &format!("ip -n {ns} -batch -")) {
            Ok(_) => {
                self.done.extend(cmds.iter().map(Cmd::to_string));
                Ok(())
            }
            Err(ExecError::Failed { stderr, .. }) => {
                let at = failed_line(&stderr).filter(|n| *n <= cmds.len());
                let failed = at.map_or(0, |n| n - 1);
                self.done.extend(cmds[..failed].iter().map(Cmd::to_string));
                let cmd = match at {
                    Some(_) => cmds[failed].to_string(),
                    None => format!("ip -n {ns} -batch - <<'EOF'\n{lines}EOF"),
                };
                Err(ExecError::Failed { cmd, stderr })
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
