//! Fetch lines: what a client program prints on stdout, one JSON object per line, so that
//! its own timings reach the run report. qbench's quic-go and Chromium drivers speak it, and
//! an `exec:` program may.
//!
//! Times are microseconds since the program's zero, which its `zero` line places on a clock
//! qbench can read too: `monotonic_us` (CLOCK_MONOTONIC, the same on the whole machine) or
//! `unix_us` (the wall clock, for programs that have nothing better, such as a browser's
//! Resource Timing). Lines that do not begin with `{` are ignored (a program's chatter);
//! lines that do must parse.

use serde::{Deserialize, Serialize};

use crate::errors::ErrorKind;

/// Longest stdout a client may leave for qbench to read, per process.
pub const MAX_STDOUT: usize = 64 * 1024 * 1024;

/// Latest time a line may give, in µs from the program's zero: a day, as for curl's times.
/// Beyond it a time is no measurement (2^64-1 µs would be a PLT of 584,000 years).
pub const MAX_TIME_US: u64 = 86_400_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum FetchLine {
    /// Where the program's zero is.
    Zero {
        #[serde(default)]
        monotonic_us: Option<u64>,
        #[serde(default)]
        unix_us: Option<u64>,
    },
    /// The program's (or its stack's) version.
    Version { version: String },
    /// A connection the program opened.
    Connection {
        conn: u64,
        start_us: u64,
        #[serde(default)]
        handshake_us: Option<u64>,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        error_kind: Option<ErrorKind>,
    },
    /// One request: sent, response head, last body byte (or failure).
    Request {
        url: String,
        #[serde(default)]
        conn: Option<u64>,
        start_us: u64,
        #[serde(default)]
        headers_us: Option<u64>,
        done_us: u64,
        bytes: u64,
        #[serde(default)]
        status: Option<u16>,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        error_kind: Option<ErrorKind>,
        /// Whether the program checked the body against qbench's payload pattern, and it held.
        #[serde(default)]
        verified: Option<bool>,
    },
}

/// Where a program's zero lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    Monotonic(u64),
    Unix(u64),
}

/// Everything a program printed, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Printed {
    pub zero: Option<Zero>,
    pub version: Option<String>,
    pub lines: Vec<FetchLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("line {line}: {message}")]
    Bad { line: usize, message: String },
    #[error("line {line}: a second zero line")]
    TwoZeros { line: usize },
    #[error("line {line}: a zero line needs monotonic_us or unix_us")]
    NoClock { line: usize },
    #[error("line {line}: done_us {done} is before start_us {start}")]
    Backwards { line: usize, start: u64, done: u64 },
    #[error("timings but no zero line to place them")]
    NoZero,
    #[error("line {line}: {field} {value} is over a day ({MAX_TIME_US} us) from the zero")]
    Time {
        line: usize,
        field: &'static str,
        value: u64,
    },
}

/// Parses a program's stdout.
pub fn parse(text: &str) -> Result<Printed, LineError> {
    let mut out = Printed::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if !t.starts_with('{') {
            continue;
        }
        let l: FetchLine = serde_json::from_str(t).map_err(|e| LineError::Bad {
            line,
            message: e.to_string(),
        })?;
        if let Some((field, value)) = too_late(&l) {
            return Err(LineError::Time { line, field, value });
        }
        match &l {
            FetchLine::Zero {
                monotonic_us,
                unix_us,
            } => {
                let z = match (monotonic_us, unix_us) {
                    (Some(m), _) => Zero::Monotonic(*m),
                    (None, Some(u)) => Zero::Unix(*u),
                    (None, None) => return Err(LineError::NoClock { line }),
                };
                if out.zero.replace(z).is_some() {
                    return Err(LineError::TwoZeros { line });
                }
                continue;
            }
            FetchLine::Version { version } => {
                out.version = Some(version.clone());
                continue;
            }
            FetchLine::Request {
                start_us, done_us, ..
            } if done_us < start_us => {
                return Err(LineError::Backwards {
                    line,
                    start: *start_us,
                    done: *done_us,
                })
            }
            _ => {}
        }
        out.lines.push(l);
    }
    if out.zero.is_none() && !out.lines.is_empty() {
        return Err(LineError::NoZero);
    }
    Ok(out)
}

/// The first time of a line beyond `MAX_TIME_US`.
fn too_late(l: &FetchLine) -> Option<(&'static str, u64)> {
    let times = match l {
        FetchLine::Connection {
            start_us,
            handshake_us,
            ..
        } => vec![
            ("start_us", Some(*start_us)),
            ("handshake_us", *handshake_us),
        ],
        FetchLine::Request {
            start_us,
            headers_us,
            done_us,
            ..
        } => vec![
            ("start_us", Some(*start_us)),
            ("headers_us", *headers_us),
            ("done_us", Some(*done_us)),
        ],
        FetchLine::Zero { .. } | FetchLine::Version { .. } => return None,
    };
    times
        .into_iter()
        .find_map(|(f, t)| t.filter(|&t| t > MAX_TIME_US).map(|t| (f, t)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_a_session() {
        let text = r#"starting
{"event":"zero","monotonic_us":5000000}
{"event":"version","version":"quic-go v0.55.0"}
{"event":"connection","conn":0,"start_us":10,"handshake_us":900}
{"event":"request","url":"https://h/bytes/5","conn":0,"start_us":950,"headers_us":1400,"done_us":1500,"bytes":5,"status":200,"verified":true}
"#;
        let p = parse(text).unwrap();
        assert_eq!(p.zero, Some(Zero::Monotonic(5_000_000)));
        assert_eq!(p.version.as_deref(), Some("quic-go v0.55.0"));
        assert_eq!(p.lines.len(), 2);
        assert!(matches!(
            &p.lines[1],
            FetchLine::Request {
                bytes: 5,
                verified: Some(true),
                ..
            }
        ));
    }

    #[test]
    fn refuses_what_cannot_be_placed() {
        let req = r#"{"event":"request","url":"u","start_us":5,"done_us":9,"bytes":0}"#;
        assert_eq!(parse(req), Err(LineError::NoZero));
        let back = r#"{"event":"zero","unix_us":1}
{"event":"request","url":"u","start_us":9,"done_us":5,"bytes":0}"#;
        assert!(matches!(
            parse(back),
            Err(LineError::Backwards { line: 2, .. })
        ));
        assert!(matches!(
            parse(r#"{"event":"zero"}"#),
            Err(LineError::NoClock { line: 1 })
        ));
        assert!(matches!(
            parse("{\"event\":\"zero\",\"unix_us\":1}\n{\"event\":\"zero\",\"unix_us\":2}"),
            Err(LineError::TwoZeros { line: 2 })
        ));
        assert!(matches!(
            parse(r#"{"event":"request","url":"u"}"#),
            Err(LineError::Bad { line: 1, .. })
        ));
        let late = format!(
            "{{\"event\":\"zero\",\"unix_us\":1}}\n{{\"event\":\"request\",\"url\":\"u\",\"start_us\":0,\"done_us\":{},\"bytes\":0}}",
            u64::MAX
        );
        assert!(matches!(
            parse(&late),
            Err(LineError::Time {
                line: 2,
                field: "done_us",
                ..
            })
        ));
        assert!(matches!(
            parse(r#"{"event":"zero","unix_us":1,"extra":2}"#),
            Err(LineError::Bad { line: 1, .. })
        ));
    }

    proptest! {
        #[test]
        fn any_text_is_a_value_or_an_error(text in ".{0,400}") {
            let _ = parse(&text);
        }

        #[test]
        fn any_json_ish_line_is_a_value_or_an_error(
            body in r#"\{"event":"(zero|request|connection|version)"[,:"a-z_0-9{}\[\] -]{0,120}"#
        ) {
            let _ = parse(&body);
        }
    }
}
