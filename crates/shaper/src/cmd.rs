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

/// An argument that reads the same unquoted to a shell and to `ip -batch` (which splits on
/// blanks and quotes, and reads `#` as a comment): not empty, and only ASCII letters, digits
/// and `-_./:=,@`.
pub(crate) fn is_plain_word(a: &str) -> bool {
    !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@".contains(c))
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self
            .full_argv()
            .iter()
            .map(|a| {
                if is_plain_word(a) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_a_shell_or_ip_batch_would_split_or_drop_are_quoted() {
        let cmd = Cmd::new(
            Some("qb-1"),
            &["tc", "", "a b", "x#y", "it's", "user@host", "10.0.0.1/24"],
        );
        assert_eq!(
            cmd.to_string(),
            "ip netns exec qb-1 tc '' 'a b' 'x#y' 'it'\\''s' user@host 10.0.0.1/24"
        );
        assert!(!is_plain_word(""));
        assert!(is_plain_word("rate=20mbit,burst=1.5kb:a@b"));
    }
}
