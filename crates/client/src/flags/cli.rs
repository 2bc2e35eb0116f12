//! Command-line flags as typed by the user; `config` turns them into a validated `Config`.

use std::path::PathBuf;

pub use qbench_engine::plan::Outputs;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use qbench_core::spec::cpulimit::CpuSet;
use qbench_core::spec::quic_knobs::QuicKnobs;
use qbench_core::spec::{CompareSpec, CompeteSpec, RunSpec};
use qbench_core::{ByteSize, CcAlgo, Protocol, Workload};

use super::values::{parse_client_cpu, parse_rwnd};
use crate::flags::load::LoadArgs;
use crate::flags::serve::ServeArgs;
use qbench_engine::plan::{LinkChoice, TargetArgs};

/// Load generator comparing HTTP/3 (QUIC) with HTTP/2 and HTTP/1.1 (TLS over TCP).
///
/// Without --target or --url, qbench starts the matched server in-process on loopback.
#[derive(Debug, Parser)]
#[command(name = "qbench", version = env!("QBENCH_VERSION"), args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the matched server (same as the qbench-server binary)
    Serve(Box<ServeArgs>),
    /// A split-connection proxy: the matched server's listeners and limits, relaying every
    /// request over its own HTTP/3 or HTTP/2 connection to an origin (IMC'17 Figures 16-18)
    Proxy(Box<super::tools::ProxyArgs>),
    /// Compare two configurations (or one against itself, an A/A control) in back-to-back
    /// rounds: the metric's statistics, the effect with its interval, and a verdict at
    /// p < 0.01 by Mann-Whitney U (or --test welch, as IMC'17, or bootstrap)
    Compare(Box<CompareArgs>),
    /// Run every cell of a scenario file as a comparison, one JSON file per cell (resumable)
    Sweep(crate::flags::sweep::SweepArgs),
    /// Turn a sweep's results into heatmaps (HTML + SVG) like the IMC'17 figures, or a saved run
    /// or compare report into the page --html writes
    Report(ReportArgs),
    /// Run several flows at once through one bottleneck: per-flow throughput and Jain's
    /// fairness index (IMC'17 Table 4)
    Compete(Box<CompeteArgs>),
    /// Turn the criterion results of `cargo bench -p qbench-benches` into a cost table: ns per
    /// packet and CPU-seconds per GB per component, predicted CPU per GB for QUIC and TCP+TLS,
    /// and how far measured run reports are from the prediction
    Cost(CostArgs),
    /// Add the run reports of a workload's shards (`--shard I/N`) into the report of the
    /// whole: histograms and counters exactly, rates over the union of their windows
    Merge(super::tools::MergeArgs),
    /// Compare two saved run reports (or merged ones): the summaries' figures with their
    /// change, and a verdict for every per-run figure both hold (as text, Markdown, CSV or
    /// JSON)
    Diff(super::tools::DiffArgs),
    /// Write a report's histogram as HdrHistogram's .hgrm percentile distribution
    /// (milliseconds), for HdrHistogram's plotter and HistogramLogAnalyzer
    Hgrm(super::tools::HgrmArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) for qbench,
    /// qbench-server or qbench-shaper
    Completions(super::tools::CompletionsArgs),
    /// Write man pages for qbench, its subcommands, qbench-server and qbench-shaper
    Man(super::tools::ManArgs),
    /// Print the JSON Schema of a document qbench writes (or write them all with --dir)
    Schema(super::tools::SchemaArgs),
}

#[derive(Debug, Args)]
pub struct CostArgs {
    /// Run reports (`qbench --json`) of bulk transfers to hold against the prediction
    #[arg(value_name = "REPORT")]
    pub reports: Vec<PathBuf>,

    /// Criterion's output directory
    #[arg(long, value_name = "DIR", default_value = "target/criterion")]
    pub criterion: PathBuf,

    /// Cipher suite to predict for (qbench negotiates aes256gcm by default)
    #[arg(long, default_value = "aes256gcm", value_parser = ["aes128gcm", "aes256gcm", "chacha20"])]
    pub suite: String,

    /// QUIC packet size to predict for (1452 after MTU discovery on a 1500-byte path; the
    /// sizes the benches measure)
    #[arg(long, default_value_t = 1452, value_parser = parse_cost_mtu)]
    pub mtu: u16,

    /// Also write the table as JSON (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

#[derive(Debug, Args)]
pub struct CompeteArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Flows as PROTO:COUNT[,...], e.g. h3:1,h2:2 (each fetches --objects on its own connection)
    #[arg(long, value_name = "SPEC", value_parser = parse_flows)]
    pub flows: Flows,
}

/// Protocols and how many flows of each.
#[derive(Debug, Clone)]
pub struct Flows(pub Vec<(Protocol, u32)>);

fn parse_flows(s: &str) -> Result<Flows, String> {
    qbench_core::spec::parse_flows(s).map(Flows)
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A `qbench sweep --out` directory, or a saved run or compare report (`--json`), drawn as
    /// `--html` draws it (to FILE.html unless --html names the page)
    pub dir: PathBuf,

    /// Where to write the page, missing directories created [default: DIR/report.html, which
    /// replaces only an earlier report]; its heatmaps and scaling charts go beside it as
    /// STEM.heatmap-N.svg and STEM.scaling-N.svg (report.heatmap-0.svg for report.html), and
    /// an SVG file of that name that another page wrote, or the user, is never replaced
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Judge every comparison cell by this metric, recomputed from its runs [default: the
    /// one each cell was run with]
    #[arg(long, value_enum)]
    pub metric: Option<qbench_core::stats::metric::Metric>,

    /// Judge every comparison cell by this test [default: the one each cell was run with]
    #[arg(long, value_enum)]
    pub test: Option<qbench_core::stats::effect::Test>,

    #[command(flatten)]
    pub fdr: crate::flags::judge::FdrArgs,
}

#[derive(Debug, Args)]
#[command(mut_args(super::refused::hidden_in_compare))]
pub struct CompareArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// The two protocols, A,B (e.g. h2,h3) [default: --proto for both, told apart by a./b. options]
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub protos: Vec<Protocol>,

    #[command(flatten)]
    pub judge: crate::flags::judge::JudgeArgs,

    #[command(flatten)]
    pub a: crate::flags::side::SideA,

    #[command(flatten)]
    pub b: crate::flags::side::SideB,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Protocol to benchmark
    #[arg(long, value_enum, default_value = "h3")]
    pub proto: Protocol,

    /// Objects to fetch from a qbench server: COUNTxSIZE[,...], e.g. 200x5KB, 1x210MB,
    /// 10x100KB,1x1MB. KB/MB/GB are decimal, KiB/MiB/GiB binary [default: 200x5KB]
    #[arg(long, value_name = "LIST", conflicts_with = "urls")]
    pub objects: Option<Workload>,

    /// A qbench-server to benchmark, as https://HOST:PORT (default: in-process on loopback)
    #[arg(long, value_name = "URL", conflicts_with = "urls")]
    pub target: Option<String>,

    /// Fetch this resource from any HTTPS server instead of a qbench server (repeatable;
    /// all URLs must share one host and port). Bodies are checked against content-length
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,

    /// With --url: fetch each URL this many times per run
    #[arg(long, default_value_t = 1, requires = "urls",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,

    /// Connect to this address instead of resolving the URL's host, which is still used
    /// for TLS (SNI, certificate check) and the :authority header, like curl's --connect-to
    #[arg(long, value_name = "IP:PORT")]
    pub connect_to: Option<std::net::SocketAddr>,

    /// Trust this PEM certificate (e.g. the one qbench-server wrote) instead of system roots
    #[arg(long, value_name = "PEM")]
    pub ca: Option<PathBuf>,

    /// Accept any server certificate. Recorded in the report; never use for real traffic
    #[arg(long, conflicts_with = "ca")]
    pub insecure: bool,

    /// The token of a server run with `--telemetry token` (never written to reports)
    #[arg(
        long,
        value_name = "TOKEN",
        env = "QBENCH_TELEMETRY_TOKEN",
        hide_env_values = true
    )]
    pub telemetry_token: Option<String>,

    /// Concurrent requests per connection [default: 256 for h2/h3, the matched server's stream limit; h1 is always 1]
    #[arg(long, value_parser = qbench_core::spec::bounds::STREAMS.value_parser())]
    pub streams: Option<u32>,

    /// Connections per run; objects are spread over them round-robin. qbench raises its
    /// open-file limit to the hard limit, and says before starting if that is too low
    #[arg(long, default_value_t = 1, value_parser = qbench_core::spec::bounds::CONNECTIONS.value_parser())]
    pub connections: u32,

    /// Repetitions, each with fresh connections (see --reuse)
    #[arg(long, default_value_t = 1, value_parser = qbench_core::spec::bounds::RUNS.value_parser())]
    pub runs: u32,

    /// Keep the first run's connections open for later runs (warm connections)
    #[arg(long)]
    pub reuse: bool,

    /// Resume TLS sessions in runs after the first (session tickets)
    #[arg(long)]
    pub resume: bool,

    /// Send requests as QUIC 0-RTT early data in runs after the first (h3; implies --resume)
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,

    /// Check body content: qbench-server objects byte for byte against the payload pattern;
    /// URLs by SHA-256, equal across fetches and listed in the report. Costs client CPU
    #[arg(long)]
    pub verify: bool,

    /// Give up on a connection or object after this long without progress (e.g. 10s, 500ms).
    /// With --client, each program gets the nearest it has: curl, h2load and ngtcp2 a
    /// no-progress limit; quic-go, chromium and exec a deadline that grows with the bytes
    /// expected at 1 Mbit/s (see the book's "Other clients")
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,

    /// Write the JSON report here after every run ("-" for stdout, then nothing else goes there)
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,

    /// Congestion controller of the in-process server's senders (h3: quinn; h1/h2: the
    /// kernel's TCP_CONGESTION) [default: cubic]. For a remote server, set it there
    #[arg(long, value_enum)]
    pub cc: Option<CcAlgo>,

    /// Cap the server's congestion window at this many full-sized packets (the IMC'17 MACW).
    /// h3: quinn's window, in packets of the path MTU (1200 bytes until MTU discovery raises
    /// it, 1452 on a 1500-byte link). h1/h2: the kernel's cwnd, in segments of the MSS (1448
    /// bytes on a 1500-byte link), a locked route metric in the server's namespace (--link)
    #[arg(long, value_name = "PACKETS", value_parser = qbench_core::spec::bounds::WINDOW_PACKETS.value_parser())]
    pub cwnd_cap: Option<u32>,

    /// Initial congestion window of the server's sender. h3: in packets of 1200 bytes
    /// (quinn's default is 12,000 bytes). h1/h2: in segments of the MSS, the route's initcwnd
    /// in the server's namespace (--link; the kernel's default is 10)
    #[arg(long, value_name = "PACKETS", value_parser = qbench_core::spec::bounds::WINDOW_PACKETS.value_parser())]
    pub initial_cwnd: Option<u32>,

    /// Packets that may overtake one before it is declared lost: QUIC's packet threshold
    /// (quinn, both ends), TCP's net.ipv4.tcp_reordering in the server's namespace (--link)
    /// [default: 3, the stacks' own]
    #[arg(long, value_name = "PACKETS", value_parser = qbench_core::spec::bounds::REORDER_THRESHOLD.value_parser())]
    pub reorder_threshold: Option<u32>,

    /// QUIC's time threshold, in RTTs: a packet sent this long before one that was
    /// acknowledged is declared lost (quinn, both ends; h3 only) [default: 1.125]
    #[arg(long, value_name = "RTTS", value_parser = qbench_core::spec::parse_time_threshold)]
    pub reorder_time_threshold: Option<f64>,

    /// Cap the client's receive window: QUIC stream and connection windows, HTTP/2 windows,
    /// TCP SO_RCVBUF and TCP_WINDOW_CLAMP (e.g. 64KiB)
    #[arg(long, value_name = "BYTES", value_parser = parse_rwnd)]
    pub rwnd: Option<ByteSize>,

    /// QUIC stack settings of both ends (h3; with --target, the client's end only):
    /// ack-frequency=PACKETS, ack-delay=DURATION, gso=on|off, gro=on|off, mtu-discovery=on|off,
    /// max-udp-payload=BYTES, initial-mtu=BYTES, initial-rtt=DURATION, send-window=SIZE,
    /// rcvbuf=SIZE, sndbuf=SIZE (UDP sockets' receive and send buffers)
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub quic: Option<QuicKnobs>,

    /// Interval at which the in-process server samples sender telemetry; 0 turns it off
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub sample_interval: Duration,

    /// Do not fetch sender telemetry from the server after each run
    #[arg(long)]
    pub no_telemetry: bool,

    /// Write the inferred congestion-control state machine as Graphviz (all runs)
    #[arg(long, value_name = "FILE.dot")]
    pub state_graph: Option<PathBuf>,

    /// Draw the sender's congestion window over time (first run) as SVG
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Write one qlog file (JSON-SEQ, for qvis) per QUIC connection into this directory, the
    /// client's and the in-process server's (client-PID-N.sqlog, server-PID-N-PEER.sqlog)
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,

    /// With --qlog: the share of connections that write one (0 to 1) [default: 1]
    #[arg(long, value_name = "P", value_parser = qbench_server::options::share)]
    pub qlog_sample: Option<f64>,

    /// Append the TLS secrets of every connection (h1, h2, h3) to this file in NSS key log
    /// format, for Wireshark to decrypt a capture (the in-process server's are the same)
    #[arg(long, value_name = "FILE", env = "SSLKEYLOGFILE")]
    pub keylog: Option<PathBuf>,

    /// Write one line per request to this file (TSV: run, connection, stream, intended start,
    /// start, TTFB, end, bytes, status, error, warm-up (1) or measured (0), URL; times in
    /// microseconds from the run's start)
    #[arg(long, value_name = "FILE")]
    pub log_requests: Option<PathBuf>,

    /// Write the object latency of all runs as HdrHistogram's .hgrm percentile distribution
    /// (milliseconds), for HdrHistogram's plotter
    #[arg(long, value_name = "FILE.hgrm")]
    pub hgrm: Option<PathBuf>,

    /// Write the report as one self-contained HTML page (summary, latency over time, CDFs,
    /// cwnd, errors, thresholds, environment; compare: both sides and the verdict), written
    /// whenever the JSON report is, a partial run's too
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,

    #[command(flatten)]
    pub build: crate::flags::link::LinkBuildArgs,

    /// Client threads (1: everything runs on the main thread). With more, each connection of a
    /// closed or open loop runs on one of them with its requests (and, for h3, its UDP socket)
    #[arg(long, default_value_t = 1, value_parser = qbench_core::spec::bounds::THREADS.value_parser())]
    pub client_threads: u32,

    /// Run the client's threads (not the in-process server's) under a CPU quota of this
    /// share of one core, e.g. 0.25 (cgroup v2 cpu.max, else v1 cpu.cfs_quota_us; root)
    #[arg(long, value_name = "FRACTION", value_parser = parse_client_cpu)]
    pub client_cpu: Option<f64>,

    /// Pin the client's threads to these CPUs, e.g. 1 or 0-1,3
    #[arg(long, value_name = "CPUS")]
    pub client_cpuset: Option<CpuSet>,

    /// Worker threads of the in-process server
    #[arg(long, default_value_t = 1, value_parser = qbench_core::spec::bounds::THREADS.value_parser())]
    pub server_threads: u32,

    /// The in-process server's threads (the sender) get this share of a core in slices of
    /// PERIOD (100ms): a CFS quota (cfs:, default), SCHED_DEADLINE, or their CPU taken (steal:)
    #[arg(long, value_name = "[SCHED:]SHARE[/PERIOD]")]
    pub server_cpu: Option<qbench_core::spec::server_cpu::ServerCpu>,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub apps: crate::flags::apps::AppArgs,

    #[command(flatten)]
    pub contestant: crate::flags::contestant::ClientArgs,

    #[command(flatten)]
    pub fleet: crate::flags::fleet::FleetArgs,

    #[command(flatten)]
    pub gate: crate::flags::gate::GateArgs,

    #[command(flatten)]
    pub live: crate::flags::gate::LiveArgs,

    /// With --interval: write each interval as one JSON line here ("-" for stdout)
    #[arg(long, value_name = "FILE")]
    pub json_stream: Option<String>,
}

/// `cost --mtu`: one of the packet sizes the benches measure.
fn parse_cost_mtu(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n @ (1200 | 1452)) => Ok(n),
        _ => Err(format!(
            "`{s}`: 1200 or 1452 (the sizes the benches measure)"
        )),
    }
}

impl RunArgs {
    /// Files written about one benchmark's connections and requests: `compare` and
    /// `compete` refuse them (`qbench hgrm` reads a side's or a flow's report instead).
    pub fn refuse_single_benchmark_outputs(
        &self,
        command: &str,
    ) -> Result<(), qbench_engine::error::ConfigError> {
        for (flag, given) in [
            ("--qlog", self.qlog.is_some() || self.qlog_sample.is_some()),
            ("--log-requests", self.log_requests.is_some()),
            ("--hgrm", self.hgrm.is_some()),
        ] {
            qbench_engine::error::usage(
                !given,
                flag,
                format!("is written by a single benchmark (qbench without a subcommand), not by {command}"),
            )?;
        }
        qbench_engine::error::usage(
            command == "compare" || self.html.is_none(),
            "--html",
            format!("draws a single benchmark's or a comparison's report, not {command}'s"),
        )?;
        qbench_engine::error::usage(
            self.live.metrics_listen.is_none(),
            "--metrics-listen",
            format!(
                "serves a single benchmark's counts (qbench without a subcommand), not {command}'s"
            ),
        )?;
        qbench_engine::error::usage(
            !self.gate.fail_early,
            "--fail-early",
            format!("judges a single benchmark's intervals (qbench without a subcommand), not {command}'s rounds"),
        )?;
        qbench_engine::error::usage(
            !self.live.tui,
            "--tui",
            format!(
                "shows a single benchmark's live view (qbench without a subcommand), not {command}'s: its bar says which round and side run"
            ),
        )?;
        // A comparison is judged by how much worse a side is; a single benchmark's figures
        // by themselves.
        let wrong = self
            .gate
            .fail_if
            .iter()
            .find(|t| command != "compare" || !t.metric.of_comparison());
        match wrong {
            Some(t) if command == "compare" => qbench_engine::error::usage(
                false,
                "--fail-if",
                format!("`{t}` judges a single benchmark's report; compare takes a-worse>P% or b-worse>P%"),
            ),
            Some(_) => qbench_engine::error::usage(
                false,
                "--fail-if",
                format!("judges a single benchmark's report or a comparison, not {command}'s"),
            ),
            None => Ok(()),
        }
    }

    /// What these flags measure.
    pub fn spec(&self) -> RunSpec {
        RunSpec {
            proto: self.proto,
            objects: (self.apps.video.is_none() && self.apps.page.is_none())
                .then(|| self.objects.clone().unwrap_or_default()),
            streams: self.streams,
            connections: self.connections,
            runs: self.runs,
            reuse: self.reuse,
            resume: self.resume,
            zero_rtt: self.zero_rtt,
            verify: self.verify,
            timeout: self.timeout,
            cc: self.cc,
            cwnd_cap: self.cwnd_cap,
            initial_cwnd: self.initial_cwnd,
            reorder_threshold: self.reorder_threshold,
            reorder_time_threshold: self.reorder_time_threshold,
            client_cpu: self.client_cpu,
            client_cpuset: self.client_cpuset.clone(),
            rwnd: self.rwnd,
            quic: self.quic.unwrap_or_default(),
            sample_interval: self.sample_interval,
            telemetry: !self.no_telemetry,
            link: self.build.link.clone(),
            link_b: self.build.chain.link_b.clone(),
            proxy: self.build.chain.proxy,
            client_threads: self.client_threads,
            server_threads: self.server_threads,
            server_cpu: self.server_cpu,
            load: self.load.load(),
            interval: self.load.interval,
            // Resolved by the benchmark command, which alone takes --shard.
            shard: None,
            video: self.apps.video(),
            page: self.apps.page.clone(),
            client: self.contestant.program(),
            server: self.contestant.server_program(),
        }
    }

    pub fn target(&self) -> TargetArgs {
        TargetArgs {
            target: self.target.clone(),
            urls: self.urls.clone(),
            repeat: self.repeat,
            connect_to: self.connect_to,
            ca: self.ca.clone(),
            insecure: self.insecure,
            telemetry_token: self.telemetry_token.clone(),
        }
    }

    pub fn link_choice(&self) -> LinkChoice {
        LinkChoice {
            backend: self.build.backend,
            offloads: self.build.offloads,
            calibrate: !self.build.no_calibrate,
            strict: self.build.strict_link,
        }
    }

    pub fn outputs(&self) -> Outputs {
        Outputs {
            json: self.json.clone(),
            state_graph: self.state_graph.clone(),
            plot: self.plot.clone(),
            hgrm: self.hgrm.clone(),
            log_requests: self.log_requests.clone(),
            json_stream: self.json_stream.clone(),
            keylog: self.keylog.clone(),
            html: self.html.clone(),
        }
    }
}

impl CompareArgs {
    /// An error naming the flag when `--protos` does not name exactly two or the rounds'
    /// flags do not fit together.
    pub fn spec(&self) -> Result<CompareSpec, qbench_engine::error::ConfigError> {
        let base = self.run.spec();
        let protos = match self.protos.as_slice() {
            [] => (base.proto, base.proto),
            [a, b] => (*a, *b),
            _ => {
                return Err(qbench_engine::error::ConfigError {
                    flag: "--protos",
                    message: "give exactly two, as A,B".into(),
                })
            }
        };
        let (rounds, auto_rounds) = self.judge.rounds()?;
        Ok(CompareSpec {
            base,
            protos,
            rounds,
            auto_rounds,
            a: self.a.0.clone(),
            b: self.b.0.clone(),
        })
    }
}

impl CompeteArgs {
    pub fn spec(&self) -> CompeteSpec {
        CompeteSpec {
            base: self.run.spec(),
            flows: self.flows.0.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command, RunSpec};

    /// The flags' defaults are the spec's: a scenario cell that leaves a field out measures
    /// what `qbench` without that flag does.
    #[test]
    fn flag_defaults_are_the_spec_defaults() {
        let cli = Cli::try_parse_from(["qbench"]).unwrap();
        assert_eq!(cli.run.spec(), RunSpec::default());
        let cli = Cli::try_parse_from(["qbench", "compare", "--protos", "h2,h3"]).unwrap();
        let spec = match cli.command {
            Some(Command::Compare(c)) => c.spec().ok(),
            _ => None,
        }
        .expect("a comparison of two protocols");
        assert_eq!(spec.base, RunSpec::default());
        assert_eq!(spec.rounds, qbench_core::scenario::DEFAULT_ROUNDS);
    }
}
