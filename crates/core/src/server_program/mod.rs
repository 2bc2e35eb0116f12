//! Third-party servers run in qbench-server's place (`--server`), behind the same link, on
//! the run's certificate and a document root of generated files: which program, what it can
//! speak, how it is spelled, and what a run records of it. Pure: spawning is the engine's.

use std::fmt;
use std::str::FromStr;

use crate::wire::Protocol;

pub mod record;
pub mod template;

pub use record::{ServerRun, Unmatched};
pub use template::{ServerTemplate, ServerTemplateError, ServerValues};

/// A server program that serves the run's objects instead of qbench's in-process server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerProgram {
    /// Debian's caddy (Go's TLS and HTTP/2, quic-go's HTTP/3): a Caddyfile per run.
    Caddy,
    /// Debian's nginx (h1, h2; Debian 12's has no HTTP/3): an nginx.conf per run.
    Nginx,
    /// quic-go's HTTP/3 server, built from `servers/quicgo`.
    QuicGo,
    /// ngtcp2's example HTTP/3 server (Debian `ngtcp2-server`: `gtlsserver`).
    Ngtcp2,
    /// hypercorn (h11, h2 and aioquic) with `servers/hypercorn/qbench_files.py`.
    Hypercorn,
    /// Any other program, from a command template.
    Exec(Box<ServerTemplate>),
}

/// The names `--server` takes, besides `exec:TEMPLATE`.
pub const NAMES: [&str; 6] = ["qbench", "caddy", "nginx", "quic-go", "ngtcp2", "hypercorn"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    #[error("unknown server `{0}`; expected one of qbench, caddy, nginx, quic-go, ngtcp2, hypercorn or exec:TEMPLATE")]
    Unknown(String),
    #[error(transparent)]
    Template(#[from] ServerTemplateError),
    #[error("{server} does not serve {proto}; it serves {serves}")]
    Protocol {
        server: String,
        proto: Protocol,
        serves: String,
    },
}

impl ServerProgram {
    /// `None` for `qbench` (the in-process qbench-server).
    pub fn parse(s: &str) -> Result<Option<Self>, ServerError> {
        Ok(Some(match s {
            "qbench" => return Ok(None),
            "caddy" => Self::Caddy,
            "nginx" => Self::Nginx,
            "quic-go" => Self::QuicGo,
            "ngtcp2" => Self::Ngtcp2,
            "hypercorn" => Self::Hypercorn,
            _ => match s.strip_prefix("exec:") {
                Some(t) => Self::Exec(Box::new(ServerTemplate::parse(t)?)),
                None => return Err(ServerError::Unknown(s.to_string())),
            },
        }))
    }

    /// The short name: `exec` for any template.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Caddy => "caddy",
            Self::Nginx => "nginx",
            Self::QuicGo => "quic-go",
            Self::Ngtcp2 => "ngtcp2",
            Self::Hypercorn => "hypercorn",
            Self::Exec(_) => "exec",
        }
    }

    /// The protocols it serves.
    pub fn serves(&self) -> &'static [Protocol] {
        match self {
            Self::Caddy | Self::Hypercorn | Self::Exec(_) => {
                &[Protocol::H1, Protocol::H2, Protocol::H3]
            }
            Self::Nginx => &[Protocol::H1, Protocol::H2],
            Self::QuicGo | Self::Ngtcp2 => &[Protocol::H3],
        }
    }

    /// `proto` if this server serves it.
    pub fn check(&self, proto: Protocol) -> Result<(), ServerError> {
        if self.serves().contains(&proto) {
            return Ok(());
        }
        let serves: Vec<String> = self.serves().iter().map(|p| p.to_string()).collect();
        Err(ServerError::Protocol {
            server: self.name().to_string(),
            proto,
            serves: serves.join(" and "),
        })
    }

    /// The program looked up on `PATH` (the template's first word for `exec`).
    pub fn program(&self) -> String {
        match self {
            Self::Caddy => "caddy".into(),
            Self::Nginx => "nginx".into(),
            Self::QuicGo => "qbench-quicgo-server".into(),
            Self::Ngtcp2 => "gtlsserver".into(),
            Self::Hypercorn => "hypercorn".into(),
            Self::Exec(t) => t.program(),
        }
    }

    /// The environment variable that names the program instead of `PATH`, if any.
    pub fn program_env(&self) -> Option<&'static str> {
        match self {
            Self::QuicGo => Some("QBENCH_QUICGO_SERVER"),
            _ => None,
        }
    }

    /// How to get the program when it is missing.
    pub fn install_hint(&self) -> &'static str {
        match self {
            Self::Caddy => "apt-get install caddy",
            Self::Nginx => "apt-get install nginx",
            Self::QuicGo => "build it with `go build -o qbench-quicgo-server .` in servers/quicgo (Go 1.26+) and put it on PATH, or set QBENCH_QUICGO_SERVER",
            Self::Ngtcp2 => "apt-get install ngtcp2-server",
            Self::Hypercorn => "pip install 'hypercorn[h3]'",
            Self::Exec(_) => "install it, or give the path of an executable file in the template",
        }
    }
}

impl fmt::Display for ServerProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exec(t) => write!(f, "exec:{t}"),
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for ServerProgram {
    type Err = ServerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)?.ok_or_else(|| ServerError::Unknown(s.to_string()))
    }
}

crate::serde_str::string_serde!(ServerProgram, {
    "type": "string",
    "description": "caddy, nginx, quic-go, ngtcp2, hypercorn or exec:TEMPLATE."
});

/// A side's `--a.server`: a program, or `qbench` (its own) where the common flag names one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerChoice(pub Option<ServerProgram>);

impl FromStr for ServerChoice {
    type Err = ServerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServerProgram::parse(s).map(Self)
    }
}

impl fmt::Display for ServerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(p) => p.fmt(f),
            None => f.write_str("qbench"),
        }
    }
}

crate::serde_str::string_serde!(ServerChoice, {
    "type": "string",
    "description": "qbench (the in-process server), caddy, nginx, quic-go, ngtcp2, hypercorn or exec:TEMPLATE."
});

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_parse_and_print_back() {
        assert_eq!(ServerProgram::parse("qbench"), Ok(None));
        for name in &NAMES[1..] {
            let p = ServerProgram::parse(name).unwrap().unwrap();
            assert_eq!(p.to_string(), *name);
            assert_eq!(p.name(), *name);
        }
        let e = ServerProgram::parse("exec:srv -p {port} -d {root}")
            .unwrap()
            .unwrap();
        assert_eq!(e.to_string(), "exec:srv -p {port} -d {root}");
        assert_eq!(e.program(), "srv");
        assert!(matches!(
            ServerProgram::parse("apache"),
            Err(ServerError::Unknown(_))
        ));
        assert_eq!(
            "qbench".parse::<ServerChoice>().unwrap().to_string(),
            "qbench"
        );
    }

    #[test]
    fn a_server_is_refused_a_protocol_it_does_not_serve() {
        let e = ServerProgram::Nginx.check(Protocol::H3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "nginx does not serve h3; it serves h1 and h2"
        );
        assert!(ServerProgram::Ngtcp2.check(Protocol::H2).is_err());
        assert!(ServerProgram::Caddy.check(Protocol::H3).is_ok());
    }

    proptest! {
        #[test]
        fn any_name_is_a_value_or_an_error(s in r#"(exec:)?[a-z{}'" =/:-]{0,40}"#) {
            if let Ok(Some(p)) = ServerProgram::parse(&s) {
                prop_assert_eq!(p.to_string().parse::<ServerProgram>().ok(), Some(p));
            }
        }
    }
}
