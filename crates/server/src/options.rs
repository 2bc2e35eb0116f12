//! Server settings, shared by `qbench-server`, `qbench serve` and the in-process server.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use qbench_core::report::sender::TlsRecords;
use qbench_core::spec::quic_knobs::QuicKnobs;
use qbench_core::wire::{MAX_OBJECT, MAX_REQUEST_HEADER_BYTES, MAX_STREAMS};
use qbench_core::{CcAlgo, Protocol};

/// Settings of the matched server. `qbench-server`'s flags (`cli::ServerArgs`) give each
/// field; `Default` holds their defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerOptions {
    /// h3 on UDP and h2 + http/1.1 on TCP share this port.
    pub listen: SocketAddr,
    pub protocols: Vec<Protocol>,
    /// Largest object `/bytes/N` will serve, in bytes.
    pub max_object: u64,
    /// Concurrent request streams allowed per connection (h2 and h3).
    pub max_streams: u32,
    /// Largest request header section accepted, in bytes (h1, h2 and h3).
    pub max_header_bytes: u32,
    /// PEM certificate chain and its key; a self-signed certificate is generated without them.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// Extra DNS names or IP addresses for the generated certificate.
    pub cert_names: Vec<String>,
    /// One qlog file per QUIC connection in this directory, for this share of connections.
    pub qlog: Option<PathBuf>,
    pub qlog_sample: f64,
    /// TLS secrets of every connection appended here, in NSS key log format.
    pub keylog: Option<PathBuf>,
    pub cc: CcAlgo,
    /// QUIC sender's congestion-window cap and initial window, in packets.
    pub cwnd_cap: Option<u32>,
    pub initial_cwnd: Option<u32>,
    /// QUIC loss detection: packet threshold, and time threshold in RTTs (quinn's when `None`).
    pub reorder_threshold: Option<u32>,
    pub reorder_time_threshold: Option<f64>,
    pub quic: QuicKnobs,
    pub tls_records: TlsRecords,
    /// Sender telemetry sampling; zero turns it off.
    pub sample_interval: Duration,
    pub telemetry: TelemetryAccess,
    /// Concurrent connections (TCP and QUIC together); more are closed or refused at once.
    pub max_connections: u32,
    pub handshake_timeout: Duration,
    /// An HTTP/1.1 request head's time, which is h1's idle timeout too.
    pub header_timeout: Duration,
    /// A connection with no bytes moving either way this long is closed.
    pub idle_timeout: Duration,
    pub stall: Option<crate::stall::StallSpec>,
}

/// The default of `--max-connections`.
pub const MAX_CONNECTIONS: u32 = 1024;

/// Who may fetch a connection's telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum TelemetryAccess {
    /// Any peer (the default: qbench fetches it after every run)
    On,
    /// Nobody: telemetry is answered 404
    Off,
    /// Peers connecting from a loopback address
    Loopback,
    /// Peers that send `Authorization: Bearer <token>` with the token the server prints
    Token,
}

/// `--qlog-sample`: a share from 0 to 1.
pub fn share(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a share from 0 to 1 (e.g. 0.1)")),
    }
}

impl ServerOptions {
    pub fn serves(&self, p: Protocol) -> bool {
        self.protocols.contains(&p)
    }

    /// Cap in bytes as the telemetry reports it, at QUIC's initial 1200-byte packets.
    pub fn initial_window_bytes(&self) -> Option<u64> {
        self.initial_cwnd.map(|p| u64::from(p) * 1200)
    }

    /// Loopback on an ephemeral port, every other option at its default: the in-process
    /// server.
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            ..Self::default()
        }
    }
}

/// `qbench-server` run without flags.
impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 4433)),
            protocols: vec![Protocol::H1, Protocol::H2, Protocol::H3],
            max_object: MAX_OBJECT,
            max_streams: MAX_STREAMS,
            max_header_bytes: MAX_REQUEST_HEADER_BYTES,
            cert: None,
            key: None,
            cert_names: Vec::new(),
            qlog: None,
            qlog_sample: 1.0,
            keylog: None,
            cc: CcAlgo::Cubic,
            cwnd_cap: None,
            initial_cwnd: None,
            reorder_threshold: None,
            reorder_time_threshold: None,
            quic: QuicKnobs::default(),
            tls_records: TlsRecords::Dynamic,
            sample_interval: Duration::from_millis(10),
            telemetry: TelemetryAccess::On,
            max_connections: MAX_CONNECTIONS,
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            stall: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn loopback_takes_every_default() {
        let o = ServerOptions::loopback();
        assert!(o.listen.ip().is_loopback() && o.listen.port() == 0);
        assert_eq!(o.max_connections, MAX_CONNECTIONS);
        assert_eq!(o.idle_timeout, Duration::from_secs(30));
        assert_eq!(o.telemetry, TelemetryAccess::On);
        assert_eq!(o.tls_records, TlsRecords::Dynamic);
    }

    proptest! {
        #[test]
        fn share_parser_never_panics(s in "\\PC{0,24}") {
            if let Ok(v) = share(&s) {
                prop_assert!((0.0..=1.0).contains(&v));
            }
        }
    }
}
