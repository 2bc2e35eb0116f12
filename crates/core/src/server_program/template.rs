//! `--server 'exec:TEMPLATE'`: the command line of any server program, with placeholders for
//! what qbench gives it, split like a POSIX shell would (no shell runs it).

use std::fmt;

use crate::words::{Piece, WordError};

/// A placeholder and what it becomes.
pub const PLACEHOLDERS: [(&str, &str); 8] = [
    (
        "addr",
        "the address to listen on (198.18.0.2 behind a link, else 127.0.0.1)",
    ),
    ("port", "the port to listen on, TCP and UDP alike"),
    (
        "cert",
        "the PEM file of the run's certificate, which the client trusts",
    ),
    ("key", "the PEM file of its private key"),
    (
        "root",
        "the document root: a file of exactly N bytes at bytes/N for every object size",
    ),
    (
        "dir",
        "an empty directory for the server's own files; removed after the run",
    ),
    ("threads", "--server-threads"),
    ("proto", "h1, h2 or h3"),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerTemplateError {
    #[error("--server exec: the template is empty")]
    Empty,
    #[error("--server exec: unbalanced quotes in `{0}`")]
    Quotes(String),
    #[error("--server exec: unknown placeholder `{{{0}}}`; known: {{addr}} {{port}} {{cert}} {{key}} {{root}} {{dir}} {{threads}} {{proto}}")]
    Unknown(String),
    #[error("--server exec: `{{` without a closing `}}` in `{0}`")]
    Unclosed(String),
    #[error("--server exec: the template needs {{port}}: qbench chooses where the server listens")]
    NoPort,
    #[error("--server exec: the program (the first word) cannot be a placeholder")]
    Program,
}

/// A checked server template.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerTemplate {
    source: String,
    words: Vec<String>,
}

/// What the placeholders become for one run's server.
#[derive(Debug, Clone)]
pub struct ServerValues<'a> {
    pub addr: &'a str,
    pub port: u16,
    pub cert: &'a str,
    pub key: &'a str,
    pub root: &'a str,
    pub dir: &'a str,
    pub threads: u32,
    pub proto: &'a str,
}

fn pieces(word: &str) -> Result<Vec<Piece>, ServerTemplateError> {
    crate::words::pieces(word, &PLACEHOLDERS).map_err(|e| match e {
        WordError::Unknown(n) => ServerTemplateError::Unknown(n),
        WordError::Unclosed(w) => ServerTemplateError::Unclosed(w),
    })
}

impl ServerTemplate {
    pub fn parse(source: &str) -> Result<Self, ServerTemplateError> {
        let words = crate::words::split(source)
            .ok_or_else(|| ServerTemplateError::Quotes(source.to_string()))?;
        if words.is_empty() {
            return Err(ServerTemplateError::Empty);
        }
        let mut port = false;
        for (i, w) in words.iter().enumerate() {
            let p = pieces(w)?;
            if i == 0 && p.iter().any(|p| matches!(p, Piece::Slot(_))) {
                return Err(ServerTemplateError::Program);
            }
            port |= p.contains(&Piece::Slot("port"));
        }
        if !port {
            return Err(ServerTemplateError::NoPort);
        }
        Ok(Self {
            source: source.to_string(),
            words,
        })
    }

    /// The program: the first word, its doubled braces single.
    pub fn program(&self) -> String {
        crate::words::fill(&self.words[0], &PLACEHOLDERS, |_| String::new())
    }

    /// The command line of one run's server.
    pub fn expand(&self, v: &ServerValues<'_>) -> Vec<String> {
        self.words
            .iter()
            .map(|w| {
                crate::words::fill(w, &PLACEHOLDERS, |name| match name {
                    "addr" => v.addr.to_string(),
                    "port" => v.port.to_string(),
                    "cert" => v.cert.to_string(),
                    "key" => v.key.to_string(),
                    "root" => v.root.to_string(),
                    "dir" => v.dir.to_string(),
                    "threads" => v.threads.to_string(),
                    "proto" => v.proto.to_string(),
                    _ => String::new(),
                })
            })
            .collect()
    }
}

impl fmt::Display for ServerTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn values() -> ServerValues<'static> {
        ServerValues {
            addr: "198.18.0.2",
            port: 4433,
            cert: "/r/cert.pem",
            key: "/r/key.pem",
            root: "/r/www with 'quotes' $(x)",
            dir: "/r",
            threads: 2,
            proto: "h3",
        }
    }

    #[test]
    fn a_hostile_root_stays_one_word() {
        let t = ServerTemplate::parse("srv --listen {addr}:{port} -d {root} --tls={cert},{key}")
            .unwrap();
        assert_eq!(t.program(), "srv");
        assert_eq!(
            t.expand(&values()),
            [
                "srv",
                "--listen",
                "198.18.0.2:4433",
                "-d",
                "/r/www with 'quotes' $(x)",
                "--tls=/r/cert.pem,/r/key.pem"
            ]
        );
    }

    #[test]
    fn refuses_bad_templates() {
        use ServerTemplateError as E;
        assert_eq!(ServerTemplate::parse(" "), Err(E::Empty));
        assert_eq!(ServerTemplate::parse("srv -d {root}"), Err(E::NoPort));
        assert_eq!(ServerTemplate::parse("{root} {port}"), Err(E::Program));
        assert!(matches!(
            ServerTemplate::parse("srv '{port}"),
            Err(E::Quotes(_))
        ));
        assert_eq!(
            ServerTemplate::parse("srv {ports}"),
            Err(E::Unknown("ports".into()))
        );
        assert!(matches!(
            ServerTemplate::parse("srv {port"),
            Err(E::Unclosed(_))
        ));
    }

    proptest! {
        #[test]
        fn any_template_is_a_value_or_an_error(s in r#"[a-z{}'" =/:-]{0,60}"#) {
            if let Ok(t) = ServerTemplate::parse(&s) {
                let argv = t.expand(&values());
                prop_assert_eq!(argv[0].clone(), t.program());
                prop_assert!(argv.iter().any(|w| w.contains("4433")));
            }
        }
    }
}
