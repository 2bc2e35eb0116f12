//! One command of a plan, optionally inside a namespace, as the executor runs it and
//! `--dry-run` prints it.

use std::fmt;

use serde::Serialize;

/// One command, optionally inside a namespace (`ip netns exec NS ...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cmd {
    pub ns: Option<String>,
    pub argv: Vec<String>,
    /// Text fed to the command's standard input (nft -f -).
    pub stdin: Option<String>,
}

impl Cmd {
    pub(crate) fn new(ns: Option<&str>, argv: &[&str]) -> Self {
        Self {
            ns: ns.map(str::to_string),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            stdin: None,
        }
    }

    /// The full argv as run from the root namespace.
    pub fn full_argv(&self) -> Vec<String> {
        match &self.ns {
            Some(ns) => ["ip", "netns", "exec", ns]
                .iter()
                .map(|s| s.to_string())
                .chain(self.argv.iter().cloned())
                .collect(),
            None => self.argv.clone(),
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self
            .full_argv()
            .iter()
            .map(|a| {
                if a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,".contains(c))
                {
                    a.clone()
                } else {
                    format!("'{}'", a.replace('\'', "'\\''"))
                }
            })
            .collect();
        write!(f, "{}", quoted.join(" "))?;
        if let Some(input) = &self.stdin {
            write!(f, " <<'EOF'\n{}EOF", input)?;
        }
        Ok(())
    }
}
