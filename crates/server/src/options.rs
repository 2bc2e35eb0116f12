//! Server settings, shared by `qbench-server`, `qbench serve` and the in-process server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use qbench_core::report::sender::TlsRecords;
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

    /// Largest object `/bytes/N` will serve, in bytes
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

    /// Write one qlog file (JSON-SEQ, for qvis) per QUIC connection into this directory
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,

    /// With --qlog: the share of connections that write one (0 to 1)
    #[arg(long, value_name = "P", default_value_t = 1.0, value_parser = share)]
    pub qlog_sample: f64,

    /// Append the TLS secrets of every connection (h1, h2, h3) to this file in NSS key log
    /// format, for Wireshark to decrypt a capture
    #[arg(long, value_name = "FILE", env = "SSLKEYLOGFILE")]
    pub keylog: Option<PathBuf>,

    /// Congestion controller of the server's senders: quinn's for h3, TCP_CONGESTION for h1/h2
    #[arg(long, value_enum, default_value = "cubic")]
    pub cc: CcAlgo,

    /// Cap the QUIC sender's congestion window at this many packets (the IMC'17 MACW)
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u32).range(1..))]
    pub cwnd_cap: Option<u32>,

    /// Initial congestion window of the QUIC sender, in packets of 1200 bytes
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u32).range(1..))]
    pub initial_cwnd: Option<u32>,

    /// Packets that may overtake one before QUIC declares it lost (quinn's packet threshold)
    /// [default: 3]
    #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reorder_threshold: Option<u32>,

    /// QUIC's time threshold in RTTs: a packet sent this long before an acknowledged one is
    /// declared lost (quinn's time_threshold) [default: 1.125]
    #[arg(long, value_name = "RTTS", value_parser = qbench_core::spec::parse_time_threshold)]
    pub reorder_time_threshold: Option<f64>,

    /// QUIC stack settings, KEY=VALUE,... (h3): ack-frequency=PACKETS (one ACK per this many,
    /// asked of the peer), ack-delay=DURATION, gso=on|off, gro=on|off, mtu-discovery=on|off,
    /// max-udp-payload=BYTES, initial-mtu=BYTES, initial-rtt=DURATION, send-window=SIZE
    /// [default: quinn's own]
    #[arg(
        long,
        value_name = "KEY=VALUE,...",
        default_value = "",
        hide_default_value = true
    )]
    pub quic: qbench_core::spec::quic_knobs::QuicKnobs,

    /// TLS records of h1 and h2. `dynamic`: in the first flight after the handshake and after
    /// idle (the connection's RTO, at most 1 s), a response's head gets a segment of its own
    /// and no record crosses the congestion window's edge, so no head waits for a second
    /// flight; full 16 KiB records otherwise. `full`: full records from the start
    #[arg(long, value_enum, default_value = "dynamic")]
    pub tls_records: TlsRecords,

    /// Sample sender telemetry (cwnd, RTT, losses...) this often; 0 turns it off
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub sample_interval: Duration,

    /// Who may fetch `/_qbench/telemetry`: anyone, nobody, loopback peers only, or clients
    /// that pass the token the server prints (`qbench --telemetry-token`)
    #[arg(long, value_enum, default_value = "on")]
    pub telemetry: TelemetryAccess,

    /// Concurrent connections (TCP and QUIC together); more are closed or refused at once
    #[arg(long, default_value_t = MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Time a peer has to finish the TLS (or QUIC) handshake
    #[arg(long, default_value = "10s", value_parser = positive_duration)]
    pub handshake_timeout: Duration,

    /// Time an HTTP/1.1 peer has to send a whole request head, counted from the end of the
    /// previous response on a kept-alive connection (so it is h1's idle timeout too)
    #[arg(long, default_value = "30s", value_parser = positive_duration)]
    pub header_timeout: Duration,

    /// Close a connection after this long with no bytes moving either way (h1, h2 and h3)
    #[arg(long, default_value = "30s", value_parser = positive_duration)]
    pub idle_timeout: Duration,

    /// Misbehave on purpose, to show coordinated omission: AFTER the first request, every
    /// response waits until FOR has passed (e.g. 5s+1s; FOR at most 60s)
    #[arg(long, value_name = "AFTER+FOR", value_parser = crate::stall::parse_stall)]
    pub stall: Option<crate::stall::StallSpec>,
}

/// The default of `--max-connections`.
pub const MAX_CONNECTIONS: u32 = 1024;

/// Who may fetch a connection's telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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

fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    // quinn's idle timeout is a QUIC varint of milliseconds; a day is more than any lab needs.
    if d > Duration::from_secs(86_400) {
        return Err("at most 1 day".into());
    }
    Ok(d)
}

impl ServerOptions {
    pub fn serves(&self, p: Protocol) -> bool {
        self.protocols.contains(&p)
    }

    /// Cap in bytes as the telemetry reports it, at QUIC's initial 1200-byte packets.
    pub fn initial_window_bytes(&self) -> Option<u64> {
        self.initial_cwnd.map(|p| u64::from(p) * 1200)
    }

    /// Loopback on an ephemeral port, all protocols, every other option at its default: the
    /// in-process server.
    /// The in-process server's options: every default.
    pub fn loopback() -> Self {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            opts: ServerOptions,
        }
        <Defaults as clap::Parser>::parse_from(["qbench-server", "--listen", "127.0.0.1:0"]).opts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_must_be_positive_and_at_most_a_day() {
        assert_eq!(positive_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["0s", "0", "2days", "-1s", "", "ten seconds"] {
            assert!(positive_duration(bad).is_err(), "{bad}");
        }
    }

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

        #[test]
        fn duration_parser_never_panics(s in "\\PC{0,24}") {
            let _ = positive_duration(&s);
        }

        #[test]
        fn duration_parser_never_panics_on_numbers(n in any::<u64>(), unit in "(ns|us|ms|s|m|h|d|y)") {
            if let Ok(d) = positive_duration(&format!("{n}{unit}")) {
                prop_assert!(!d.is_zero() && d <= Duration::from_secs(86_400));
            }
        }
    }
}
