//! The command line of the matched server: `qbench-server`'s parser, whose flags `qbench serve`
//! and `qbench proxy` take too. Behind the `cli` feature, so that the library (and the engine
//! above it) builds without clap.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser};

use qbench_core::report::sender::TlsRecords;
use qbench_core::wire::{MAX_OBJECT, MAX_REQUEST_HEADER_BYTES, MAX_STREAMS};
use qbench_core::{CcAlgo, Protocol};

use crate::options::{share, ServerOptions, TelemetryAccess, MAX_CONNECTIONS};
use crate::standalone::{runtime, CertOutput, ThreadsError, DEFAULT_CERT_OUT, MAX_THREADS};

/// Settings of the matched server.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
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
    #[arg(long, value_name = "PACKETS", value_parser = qbench_core::spec::bounds::WINDOW_PACKETS.value_parser())]
    pub cwnd_cap: Option<u32>,

    /// Initial congestion window of the QUIC sender, in packets of 1200 bytes
    #[arg(long, value_name = "PACKETS", value_parser = qbench_core::spec::bounds::WINDOW_PACKETS.value_parser())]
    pub initial_cwnd: Option<u32>,

    /// Packets that may overtake one before QUIC declares it lost (quinn's packet threshold)
    /// [default: 3]
    #[arg(long, value_name = "PACKETS", value_parser = qbench_core::spec::bounds::REORDER_THRESHOLD.value_parser())]
    pub reorder_threshold: Option<u32>,

    /// QUIC's time threshold in RTTs: a packet sent this long before an acknowledged one is
    /// declared lost (quinn's time_threshold) [default: 1.125]
    #[arg(long, value_name = "RTTS", value_parser = qbench_core::spec::parse_time_threshold)]
    pub reorder_time_threshold: Option<f64>,

    /// QUIC stack settings, KEY=VALUE,... (h3): ack-frequency=PACKETS (one ACK per this many,
    /// asked of the peer), ack-delay=DURATION, gso=on|off, gro=on|off, mtu-discovery=on|off,
    /// max-udp-payload=BYTES, initial-mtu=BYTES, initial-rtt=DURATION, send-window=SIZE,
    /// rcvbuf=SIZE, sndbuf=SIZE (UDP sockets' receive and send buffers)
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

impl From<ServerArgs> for ServerOptions {
    /// Destructured field by field: a flag added to one struct and not the other fails to
    /// build.
    fn from(a: ServerArgs) -> Self {
        let ServerArgs {
            listen,
            protocols,
            max_object,
            max_streams,
            max_header_bytes,
            cert,
            key,
            cert_names,
            qlog,
            qlog_sample,
            keylog,
            cc,
            cwnd_cap,
            initial_cwnd,
            reorder_threshold,
            reorder_time_threshold,
            quic,
            tls_records,
            sample_interval,
            telemetry,
            max_connections,
            handshake_timeout,
            header_timeout,
            idle_timeout,
            stall,
        } = a;
        Self {
            listen,
            protocols,
            max_object,
            max_streams,
            max_header_bytes,
            cert,
            key,
            cert_names,
            qlog,
            qlog_sample,
            keylog,
            cc,
            cwnd_cap,
            initial_cwnd,
            reorder_threshold,
            reorder_time_threshold,
            quic,
            tls_records,
            sample_interval,
            telemetry,
            max_connections,
            handshake_timeout,
            header_timeout,
            idle_timeout,
            stall,
        }
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

/// Where the generated certificate goes.
#[derive(Debug, Clone, Args)]
pub struct CertOut {
    /// Where to write the generated certificate (PEM) for clients' --ca; an existing file is
    /// left alone (the server refuses to start) unless --force
    #[arg(long, default_value = DEFAULT_CERT_OUT)]
    pub cert_out: PathBuf,

    /// Replace an existing --cert-out file
    #[arg(long)]
    pub force: bool,
}

/// How many threads serve. One per side is what a single-connection benchmark on a small
/// machine wants: a second worker of a server that can only keep one busy shares a core
/// with the client instead (measured in the book, "Userspace packet cost").
#[derive(Debug, Clone, Args)]
pub struct Threads {
    /// Worker threads of the server's runtime; connections spread over them [default: one
    /// per CPU, or TOKIO_WORKER_THREADS]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_THREADS))]
    pub threads: Option<u16>,
}

impl From<&CertOut> for CertOutput {
    fn from(c: &CertOut) -> Self {
        Self {
            path: c.cert_out.clone(),
            force: c.force,
        }
    }
}

impl Threads {
    /// The multi-threaded runtime `--threads` (or `TOKIO_WORKER_THREADS`) asks for.
    pub fn runtime(&self) -> Result<tokio::runtime::Runtime, ThreadsError> {
        runtime(self.threads)
    }
}

/// The matched qbench server: HTTP/3 on UDP and HTTP/2 + HTTP/1.1 on TCP, same port,
/// serving GET /bytes/N.
#[derive(Debug, Parser)]
#[command(name = "qbench-server", version = env!("QBENCH_VERSION"))]
pub struct Cli {
    #[command(flatten)]
    pub serve: Serve,
}

// The server's flags, the same for `qbench-server` and `qbench serve`. (A doc comment here
// would become the `about` of every command that flattens it.)
#[derive(Debug, clap::Args)]
pub struct Serve {
    #[command(flatten)]
    pub server: ServerArgs,

    #[command(flatten)]
    pub cert_out: CertOut,

    #[command(flatten)]
    pub threads: Threads,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};
    use proptest::prelude::*;

    fn parse(threads: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["qbench-server".to_string(), format!("--threads={threads}")])
    }

    /// The options `args` give, with `--keylog`'s SSLKEYLOGFILE left out: the library's
    /// defaults read no environment.
    fn options(args: &[&str]) -> ServerOptions {
        let command = ServerArgs::augment_args(clap::Command::new("qbench-server"))
            .mut_arg("keylog", |a| a.env(None));
        let matches = command.try_get_matches_from(args).unwrap();
        ServerArgs::from_arg_matches(&matches).unwrap().into()
    }

    #[test]
    fn the_flags_defaults_are_the_librarys() {
        assert_eq!(options(&["qbench-server"]), ServerOptions::default());
        assert_eq!(
            options(&["qbench-server", "--listen", "127.0.0.1:0"]),
            ServerOptions::loopback()
        );
    }

    #[test]
    fn every_flag_reaches_its_option() {
        let o = options(&[
            "qbench-server",
            "--protocols=h3",
            "--max-streams=7",
            "--cert-name=a.example",
            "--keylog=/tmp/k",
            "--cc=bbr",
            "--reorder-threshold=9",
            "--telemetry=token",
            "--idle-timeout=2s",
            "--stall=1s+1s",
        ]);
        assert_eq!(o.protocols, vec![Protocol::H3]);
        assert_eq!(o.max_streams, 7);
        assert_eq!(o.cert_names, vec!["a.example".to_string()]);
        assert_eq!(o.keylog.as_deref(), Some(std::path::Path::new("/tmp/k")));
        assert_eq!(o.cc, CcAlgo::Bbr);
        assert_eq!(o.reorder_threshold, Some(9));
        assert_eq!(o.telemetry, TelemetryAccess::Token);
        assert_eq!(o.idle_timeout, Duration::from_secs(2));
        assert!(o.stall.is_some());
    }

    #[test]
    fn the_certificate_flags_reach_the_server() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["qbench-server", "--cert-out=c.pem", "--force"]).unwrap();
        let out = CertOutput::from(&cli.serve.cert_out);
        assert_eq!(out.path, PathBuf::from("c.pem"));
        assert!(out.force);
    }

    #[test]
    fn threads_set_the_runtime_workers() {
        for n in [1, 3] {
            let cli = parse(&n.to_string()).unwrap();
            let rt = cli.serve.threads.runtime().unwrap();
            assert_eq!(rt.metrics().num_workers(), n);
        }
        let none = Cli::try_parse_from(["qbench-server"]).unwrap();
        assert_eq!(none.serve.threads.threads, None);
    }

    #[test]
    fn bad_thread_counts_are_refused_naming_the_flag() {
        for bad in ["0", "1025", "-1", "two", ""] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.to_string().contains("--threads"), "{bad}: {e}");
        }
    }

    #[test]
    fn durations_must_be_positive_and_at_most_a_day() {
        assert_eq!(positive_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["0s", "0", "2days", "-1s", "", "ten seconds"] {
            assert!(positive_duration(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn threads_parse_to_a_count_or_an_error(s in "\\PC{0,8}") {
            if let Ok(cli) = parse(&s) {
                let n = i64::from(cli.serve.threads.threads.unwrap());
                prop_assert!((1..=MAX_THREADS).contains(&n));
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
