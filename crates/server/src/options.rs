//! Server settings, shared by `qbench-server`, `qbench serve` and the in-process server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use qbench_core::wire::{MAX_OBJECT, MAX_REQUEST_HEADER_BYTES, MAX_STREAMS};
use qbench_core::{CcAlgo, Protocol};

/// Settings of the matched server.
#[derive(Debug, Clone, Args)]
pub struct ServerOptions {
    /// Address to listen on: h3 on UDP and h2 + http/1.1 on TCP share this port
    #[arg(long, default_value = "127.0.0.1:4433")]
    pub listen: SocketAddr,

    /// Protocols to serve (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "h1,h2,h3")]
    pub protocols: Vec<Protocol>,

    /// Largest object `/bytes/{n}` will serve, in bytes
    #[arg(long, default_value_t = MAX_OBJECT)]
    pub max_object: u64,

    /// Concurrent request streams allowed per connection (h2 and h3)
    #[arg(long, default_value_t = MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: u32,

    /// Largest request header section accepted, in bytes (h1, h2 and h3)
    #[arg(long, default_value_t = MAX_REQUEST_HEADER_BYTES, value_parser = clap::value_parser!(u32).range(1024..))]
    pub max_header_bytes: u32,

    /// PEM certificate chain (with --key); a self-signed one is generated otherwise
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,

    /// PEM private key for --cert
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,

    /// Extra DNS names or IP addresses for the generated certificate
    #[arg(long = "cert-name", value_name = "NAME")]
    pub cert_names: Vec<String>,

    /// Congestion controller of the server's senders: quinn's for h3, TCP_CONGESTION for h1/h2
    #[arg(long, value_enum, default_value = "cubic")]
    pub cc: CcAlgo,

    /// Cap the QUIC sender's congestion window at this many packets (the IMC'17 MACW)
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u32).range(1..))]
    pub cwnd_cap: Option<u32>,

    /// Initial congestion window of the QUIC sender, in packets of 1200 bytes
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u32).range(1..))]
    pub initial_cwnd: Option<u32>,

    /// Sample sender telemetry (cwnd, RTT, losses...) this often; 0 turns it off
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub sample_interval: Duration,
}

impl ServerOptions {
    pub fn serves(&self, p: Protocol) -> bool {
        self.protocols.contains(&p)
    }

    /// Cap in bytes as the telemetry reports it, at QUIC's initial 1200-byte packets.
    pub fn initial_window_bytes(&self) -> Option<u64> {
        self.initial_cwnd.map(|p| u64::from(p) * 1200)
    }

    /// Loopback on an ephemeral port, all protocols: the in-process default.
    pub fn loopback() -> Self {
        Self {
            listen: "127.0.0.1:0".parse().expect("valid literal address"),
            protocols: vec![Protocol::H1, Protocol::H2, Protocol::H3],
            max_object: MAX_OBJECT,
            max_streams: MAX_STREAMS,
            max_header_bytes: MAX_REQUEST_HEADER_BYTES,
            cert: None,
            key: None,
            cert_names: Vec::new(),
            cc: CcAlgo::Cubic,
            cwnd_cap: None,
            initial_cwnd: None,
            sample_interval: Duration::from_millis(10),
        }
    }
}
