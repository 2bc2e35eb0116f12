//! Kinds of failure a run counts, so a report can say *how* a run failed.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Name resolution failed or the network was unreachable.
    Unreachable,
    /// The peer actively refused the connection (TCP RST on connect, ICMP port unreachable).
    Refused,
    /// No progress within the configured timeout.
    Timeout,
    /// Certificate verification or another TLS handshake failure.
    Tls,
    /// The peer speaks none of the application protocols offered.
    Alpn,
    /// HTTP/2, HTTP/3 or QUIC protocol violation.
    Protocol,
    /// The peer reset the stream or the connection.
    Reset,
    /// The response was not 2xx.
    Status,
    /// Fewer body bytes than announced or requested.
    ShortBody,
    /// More body bytes than announced or requested.
    LongBody,
    /// Body content differs from what was expected (`--verify`).
    BodyMismatch,
    /// Any other I/O failure.
    Io,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unreachable => "unreachable",
            Self::Refused => "refused",
            Self::Timeout => "timeout",
            Self::Tls => "tls",
            Self::Alpn => "alpn",
            Self::Protocol => "protocol",
            Self::Reset => "reset",
            Self::Status => "status",
            Self::ShortBody => "short_body",
            Self::LongBody => "long_body",
            Self::BodyMismatch => "body_mismatch",
            Self::Io => "io",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error counts by kind; kinds that never happened are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct ErrorCounts(pub BTreeMap<ErrorKind, u64>);

impl ErrorCounts {
    pub fn add(&mut self, kind: ErrorKind) {
        *self.0.entry(kind).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Self) {
        for (k, v) in &other.0 {
            *self.0.entry(*k).or_default() += v;
        }
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for ErrorCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(" "))
    }
}

/// An error and its causes on one line, each cause said once: a cause whose text an outer
/// message already quotes (`reading X: No such file...` over the io error itself) is skipped,
/// where `{:#}` would repeat it. A source excerpt in any of them (the lines `4 | text` and
/// `  | ^^^` a parser shows under its message) is kept, on lines of its own below.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    let (mut text, mut excerpt) = (Vec::new(), Vec::new());
    for l in parts.join(": ").lines() {
        match is_excerpt(l) {
            true => excerpt.push(l.to_string()),
            false => text.push(l.trim().to_string()),
        }
    }
    let mut out = text.join(" ");
    for l in excerpt {
        out.push_str("\n  ");
        out.push_str(&l);
    }
    out
}

/// `12 | source` or `   | ^^^`: a line of a parser's source excerpt.
fn is_excerpt(line: &str) -> bool {
    let t = line.trim_start();
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    t[digits..].starts_with(" |") || (digits == 0 && t.starts_with('|'))
}

#[cfg(test)]
mod one_line_tests {
    use super::one_line;
    use std::io;

    #[derive(Debug, thiserror::Error)]
    #[error("reading trace /nope: {source}")]
    struct Quoting {
        source: io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("--link")]
    struct Outer(#[source] Quoting);

    #[test]
    fn a_quoted_cause_is_said_once() {
        let inner = io::Error::from(io::ErrorKind::NotFound);
        let text = inner.to_string();
        let e = Outer(Quoting { source: inner });
        let line = one_line(&e);
        assert_eq!(line.matches(&text).count(), 1, "{line}");
        assert!(line.starts_with("--link: reading trace /nope: "), "{line}");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("SCENARIO: f.toml: line 4, column 1: unknown\nfield\n  |\n4 | round = 5\n  | ^^^^^")]
    struct Excerpt;

    /// The message is one line; a parser's excerpt stays below it, a line each.
    #[test]
    fn an_excerpt_keeps_its_lines_below_the_message() {
        let line = one_line(&Excerpt);
        assert_eq!(
            line,
            "SCENARIO: f.toml: line 4, column 1: unknown field\n    |\n  4 | round = 5\n    | ^^^^^"
        );
    }
}
