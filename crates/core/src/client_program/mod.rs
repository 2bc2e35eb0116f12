//! Third-party clients run in qbench's place (`--client`): which program, what it can speak,
//! how it is spelled, and what it reports back. Pure: spawning and timing are the engine's.

use std::fmt;
use std::str::FromStr;

use crate::wire::Protocol;

pub mod curl;
pub mod h2load;
pub mod lines;
pub mod qlog;
pub mod template;

pub use template::{Template, TemplateError};

/// A client program that fetches the run's objects instead of qbench's own clients.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientProgram {
    /// curl (h1, h2): one process per connection, its `-w '%{json}'` timings per transfer.
    Curl,
    /// nghttp2's h2load (h1, h2): its per-request log file and its summary.
    H2load,
    /// ngtcp2's example HTTP/3 client (Debian `ngtcp2-client`: `gtlsclient`).
    Ngtcp2,
    /// quic-go's HTTP/3 client, built from `clients/quicgo`; it prints qbench fetch lines.
    QuicGo,
    /// Chromium, headless, driven through Playwright by `clients/chromium/fetch.py`.
    Chromium,
    /// Any other program, from a command template.
    Exec(Box<Template>),
}

/// The names `--client` takes, besides `exec:TEMPLATE`.
pub const NAMES: [&str; 6] = ["qbench", "curl", "h2load", "ngtcp2", "quic-go", "chromium"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("unknown client `{0}`; expected one of qbench, curl, h2load, ngtcp2, quic-go, chromium or exec:TEMPLATE")]
    Unknown(String),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("{client} does not speak {proto}; it speaks {speaks}")]
    Protocol {
        client: String,
        proto: Protocol,
        speaks: String,
    },
}

impl ClientProgram {
    /// `None` for `qbench` (its own clients).
    pub fn parse(s: &str) -> Result<Option<Self>, ClientError> {
        Ok(Some(match s {
            "qbench" => return Ok(None),
            "curl" => Self::Curl,
            "h2load" => Self::H2load,
            "ngtcp2" => Self::Ngtcp2,
            "quic-go" => Self::QuicGo,
            "chromium" => Self::Chromium,
            _ => match s.strip_prefix("exec:") {
                Some(t) => Self::Exec(Box::new(Template::parse(t)?)),
                None => return Err(ClientError::Unknown(s.to_string())),
            },
        }))
    }

    /// The short name: `exec` for any template.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Curl => "curl",
            Self::H2load => "h2load",
            Self::Ngtcp2 => "ngtcp2",
            Self::QuicGo => "quic-go",
            Self::Chromium => "chromium",
            Self::Exec(_) => "exec",
        }
    }

    /// The protocols it can be asked for.
    pub fn speaks(&self) -> &'static [Protocol] {
        match self {
            Self::Curl | Self::H2load => &[Protocol::H1, Protocol::H2],
            Self::Ngtcp2 | Self::QuicGo => &[Protocol::H3],
            Self::Chromium => &[Protocol::H2, Protocol::H3],
            Self::Exec(_) => &[Protocol::H1, Protocol::H2, Protocol::H3],
        }
    }

    /// `proto` if this client speaks it.
    pub fn check(&self, proto: Protocol) -> Result<(), ClientError> {
        if self.speaks().contains(&proto) {
            return Ok(());
        }
        let speaks: Vec<String> = self.speaks().iter().map(|p| p.to_string()).collect();
        Err(ClientError::Protocol {
            client: self.name().to_string(),
            proto,
            speaks: speaks.join(" and "),
        })
    }

    /// The program looked up on `PATH` (the template's first word for `exec`).
    pub fn program(&self) -> String {
        match self {
            Self::Curl => "curl".into(),
            Self::H2load => "h2load".into(),
            Self::Ngtcp2 => "gtlsclient".into(),
            Self::QuicGo => "qbench-quicgo".into(),
            Self::Chromium => "chromium".into(),
            Self::Exec(t) => t.program().to_string(),
        }
    }

    /// How to get the program when it is missing.
    pub fn install_hint(&self) -> &'static str {
        match self {
            Self::Curl => "apt-get install curl",
            Self::H2load => "apt-get install nghttp2-client",
            Self::Ngtcp2 => "apt-get install ngtcp2-client",
            Self::QuicGo => "build it with `go build -o qbench-quicgo ./clients/quicgo` (Go 1.26+) and put it on PATH, or set QBENCH_QUICGO",
            Self::Chromium => "apt-get install chromium, then pip install playwright",
            Self::Exec(_) => "install it, or give the path of an executable file in the template",
        }
    }
}

impl fmt::Display for ClientProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exec(t) => write!(f, "exec:{t}"),
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for ClientProgram {
    type Err = ClientError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)?.ok_or_else(|| ClientError::Unknown(s.to_string()))
    }
}

crate::serde_str::string_serde!(ClientProgram, {
    "type": "string",
    "description": "A third-party client: curl, h2load, ngtcp2, quic-go, chromium or exec:TEMPLATE."
});

/// One side's `--a.client`: a program, or `qbench` (its own clients) where the common
/// `--client` names one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientChoice(pub Option<ClientProgram>);

impl FromStr for ClientChoice {
    type Err = ClientError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClientProgram::parse(s).map(Self)
    }
}

impl fmt::Display for ClientChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(p) => p.fmt(f),
            None => f.write_str("qbench"),
        }
    }
}

crate::serde_str::string_serde!(ClientChoice, {
    "type": "string",
    "description": "qbench (its own clients), curl, h2load, ngtcp2, quic-go, chromium or exec:TEMPLATE."
});

#[cfg(test)]
mod tests;
