//! The versioned JSON run report. Field names are part of the public interface: change them
//! only together with `SCHEMA_VERSION`.

pub mod calibration;
pub mod ccstate;
pub mod clocks;
pub mod compare;
pub mod compete;
pub mod config;
pub mod connection;
pub mod cpu_times;
pub mod diff;
pub mod early_stop;
pub mod env_checks;
pub mod histograms_read;
pub mod link;
pub mod link_run;
pub mod live;
pub mod load;
pub mod merge;
pub mod merge_check;
pub mod merge_info;
pub mod net_counters;
pub mod net_counters_parse;
pub mod page;
pub mod sender;
pub mod server_view;
pub mod spread;
pub mod telemetry;
pub mod third_party;
pub mod thresholds;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::errors::ErrorCounts;
use crate::histogram::{HistogramError, HistogramExport, LatencyHistogram};
use crate::report::ccstate::StateMachine;
use crate::report::config::RunConfig;
use crate::report::connection::ConnectionRecord;
pub use crate::report::cpu_times::CpuTimes;
use crate::report::link::LinkReport;
use crate::report::load::{IntervalRecord, LoadReport, LoadSummary};
use crate::report::merge_info::MergeInfo;
pub use crate::report::spread::Spread;
use crate::report::telemetry::Timeline;
use crate::spec::start::StartRecord;
use crate::stats::metric::Metric;
use crate::stats::noise::Losses;
use crate::stats::saturation::ClientLoad;
use crate::stats::Stats;

pub const SCHEMA: &str = "qbench.run-report";
/// 2: `config` is the measurement configuration alone (no output paths: `json`, `plot`,
/// `state_graph` and `dry_run` left it), and a run that fails before connecting has a report.
pub const SCHEMA_VERSION: u32 = 2;

/// CPU spent during one run by the client and (when in-process) the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunCpu {
    pub client: CpuTimes,
    /// `null` when the server is not in this process.
    pub server: Option<CpuTimes>,
    /// Payload bytes per CPU-second of client + server (client only for remote servers).
    pub payload_bytes_per_cpu_s: Option<f64>,
    /// CPU seconds the client spent per GB (10^9 bytes) of payload.
    #[serde(default)]
    pub client_s_per_gb: Option<f64>,
    /// The same for the in-process server.
    #[serde(default)]
    pub server_s_per_gb: Option<f64>,
    /// The client's CPU microseconds per completed object: at a high request rate, what
    /// qbench's request path (or a `--client` program) costs beside its stack's floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_us_per_object: Option<f64>,
    /// Payload Gbit/s per core kept busy by client + server (client alone for remote
    /// servers): the rate one fully busy core would carry.
    #[serde(default)]
    pub gbit_per_busy_core: Option<f64>,
    /// The client's TCP socket calls that moved bytes during the run (h1, h2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_tcp: Option<SocketCalls>,
    /// The same for the in-process server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tcp: Option<SocketCalls>,
    /// The link emulator's forwarder threads, which run in the client's process: left out of
    /// `client` and of every figure derived from it. Absent without a userspace link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<CpuTimes>,
}

/// Socket reads and writes that moved bytes (each one system call), and the bytes they moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SocketCalls {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub written_bytes: u64,
}

impl SocketCalls {
    /// `self - earlier`, or `None` when nothing moved (no TCP in the run).
    pub fn since(&self, earlier: &Self) -> Option<Self> {
        let d = Self {
            reads: self.reads.saturating_sub(earlier.reads),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            writes: self.writes.saturating_sub(earlier.writes),
            written_bytes: self.written_bytes.saturating_sub(earlier.written_bytes),
        };
        (d.reads + d.writes > 0).then_some(d)
    }

    pub fn plus(&self, o: &Self) -> Self {
        Self {
            reads: self.reads + o.reads,
            read_bytes: self.read_bytes + o.read_bytes,
            writes: self.writes + o.writes,
            written_bytes: self.written_bytes + o.written_bytes,
        }
    }
}

impl RunCpu {
    /// With the client's CPU per object, over `completed` objects (none: `None`).
    pub fn per_object(mut self, completed: u64) -> Self {
        self.client_us_per_object =
            (completed > 0).then(|| self.client.total_s() * 1e6 / completed as f64);
        self
    }

    pub fn new(client: CpuTimes, server: Option<CpuTimes>, payload_bytes: u64) -> Self {
        let total = client.total_s() + server.map_or(0.0, |s| s.total_s());
        let gb = payload_bytes as f64 / 1e9;
        let per_gb = |s: f64| (payload_bytes > 0).then(|| s / gb);
        Self {
            client,
            server,
            payload_bytes_per_cpu_s: (total > 0.0).then(|| payload_bytes as f64 / total),
            client_s_per_gb: per_gb(client.total_s()),
            server_s_per_gb: server.and_then(|s| per_gb(s.total_s())),
            client_us_per_object: None,
            gbit_per_busy_core: (total > 0.0).then(|| gb * 8.0 / total),
            client_tcp: None,
            server_tcp: None,
            link: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObjectCounts {
    pub requested: u64,
    pub completed: u64,
    pub failed: u64,
    pub not_started: u64,
    /// Requests sent again because the server did not process them: on a new connection
    /// where it closed theirs (above a GOAWAY's last stream, after an HTTP/1.1 `Connection:
    /// close`), on the same one where it turned the stream alone away (HTTP/2
    /// REFUSED_STREAM, HTTP/3 H3_REQUEST_REJECTED). Each still counts once above.
    #[serde(default)]
    pub retried: u64,
}

/// One run: one set of fresh connections (unless reused) fetching the whole workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunReport {
    pub index: u32,
    pub complete: bool,
    pub duration_us: u64,
    /// Wall clock (unix microseconds) when the run started: the one wall-clock figure of a
    /// run, to lay shards' runs on one time line. Every other time is monotonic.
    #[serde(default)]
    pub started_unix_us: Option<u64>,
    /// First request sent and last byte received, from the run's start.
    #[serde(default)]
    pub first_request_us: Option<u64>,
    #[serde(default)]
    pub last_byte_us: Option<u64>,
    /// Mean handshake time over the run's new connections.
    pub handshake_us: Option<u64>,
    /// Page load time: client starts connecting -> last byte of the last object.
    pub plt_us: Option<u64>,
    /// Payload bits per second between the first request sent and the last byte received.
    pub goodput_bps: Option<f64>,
    pub payload_bytes: u64,
    pub objects: ObjectCounts,
    pub connections: Vec<ConnectionRecord>,
    pub errors: ErrorCounts,
    pub first_error: Option<String>,
    pub object_latency: HistogramExport,
    pub ttfb: HistogramExport,
    pub cpu: Option<RunCpu>,
    /// With `--client-cpu` or `--client-cpuset`: the quota and CPUs the client ran under, as
    /// read back, and how often the quota stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<crate::spec::cpulimit::ClientCpuRecord>,
    /// With `--server-cpu`: the slices the in-process server ran under, as read back, and
    /// how often its quota stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<crate::spec::server_cpu::ServerCpuRecord>,
    /// With `--proxy`: what the middle host's proxy carried during the run, and its CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<link::ProxyRun>,
    /// With `--verify` on URLs: SHA-256 (hex) of each URL's body.
    pub digests: Option<BTreeMap<String, String>>,
    /// Sender telemetry per connection, fetched from a qbench server after the run.
    pub telemetry: Option<Vec<Timeline>>,
    /// Congestion-control states inferred from `telemetry`.
    pub cc_states: Option<StateMachine>,
    /// With `--duration`: the held load's figures.
    #[serde(default)]
    pub load: Option<LoadReport>,
    /// With `--interval`: what completed in each interval, warm-up included (and marked).
    #[serde(default)]
    pub intervals: Vec<IntervalRecord>,
    /// The client's own load, and whether it may have limited the result.
    #[serde(default)]
    pub client: Option<ClientLoad>,
    /// The threads and sockets each side spread the run over.
    #[serde(default)]
    pub spread: Option<Spread>,
    /// What the machine (steal, load) and the link's forwarders did during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<crate::stats::noise::RunNoise>,
    /// With `--link`: what the link carried during the run by its own counters, checked
    /// against its spec after every run; `shortfalls` says why it could not carry the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_check: Option<link_run::LinkRun>,
    /// What the run added to the kernel's UDP and TCP counters, the client's and the server's
    /// (socket buffer drops, retransmissions): with `--link` each namespace's own, else the
    /// host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<net_counters::RunNetCounters>,
    /// With `--video`: the session's quality of experience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<crate::video::VideoReport>,
    /// With `--page`: when each dependency level of the page was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<page::PageReport>,
    /// With `--client`: the third-party client's processes, version and checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub third_party: Option<third_party::ThirdPartyRun>,
    /// With `--server`: the third-party server that served the run, its CPU, memory and
    /// end, and the matched settings it could not take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_program: Option<crate::server_program::ServerRun>,
    /// With `--client` and an in-process server: the run as the server saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_view: Option<server_view::ServerView>,
}

// A comparison's figure and a run's losses are statistics over runs (stats::metric,
// stats::noise); reading them out of a run report is the report's, so stats needs no report.
impl Metric {
    /// The run's figure, `None` when it has none: PLT only for a complete page; latencies
    /// only when something completed. A latency histogram holds completed requests alone,
    /// so a side that fails requests is not made faster by it: the tables show failures.
    pub fn of(self, r: &RunReport) -> Option<f64> {
        let lat = &r.object_latency.summary;
        let us = |v: Option<u64>| v.filter(|_| lat.count > 0).map(|v| v as f64);
        match self {
            Self::Plt => r.plt_us.map(|p| p as f64),
            Self::Goodput => r.goodput_bps,
            Self::Rps => match &r.load {
                Some(l) => Some(l.completed_rate),
                None => r
                    .plt_us
                    .filter(|&p| p > 0)
                    .map(|p| r.objects.completed as f64 / (p as f64 / 1e6)),
            },
            Self::P50 => us(lat.p50_us),
            Self::P99 => us(lat.p99_us),
            Self::P999 => us(lat.p999_us),
            Self::Start => r.video.as_ref()?.time_to_start_us.map(|t| t as f64),
            Self::Rebuffer => r.video.as_ref()?.rebuffer_ratio,
            Self::Bitrate => r.video.as_ref()?.mean_bitrate_bps,
            Self::Loaded => r.video.as_ref().map(|v| v.loaded_fraction),
        }
    }
}

impl Losses {
    /// `None` without telemetry or without the link's counters.
    pub fn of(run: &RunReport) -> Option<Self> {
        let declared = run
            .telemetry
            .as_ref()?
            .iter()
            .filter_map(|t| t.samples.last().map(|s| s.lost_packets))
            .sum();
        let mut l = Self::with_noise(declared, run.noise.as_ref()?)?;
        // The host's counters are every program's: not this run's to claim.
        l.socket = run
            .net
            .filter(|n| n.scope == net_counters::NetScope::Namespaces)
            .map_or(0, |n| n.client.udp_rcvbuf_errors);
        Some(l)
    }
}

/// Facts about the machine a report was produced on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub cores: Option<usize>,
    /// `net.core.{r,w}mem_{max,default}` and friends, as read from /proc/sys.
    pub sysctls: BTreeMap<String, String>,
    /// Versions of the protocol stacks this binary was built with.
    pub crates: BTreeMap<String, String>,
    /// The rustls crypto provider both sides used, for TLS and QUIC's packet protection alike:
    /// `ring` (the default build) or `aws-lc-rs`. Absent in reports from before it was
    /// recorded, which used ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_provider: Option<String>,
    /// glibc's `x86_rep_movsb_threshold` where it is not glibc's own choice or where that
    /// choice is slow on this CPU, and who decided (see qbench-server's `rep_movsb` module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rep_movsb_threshold: Option<String>,
    /// The interfaces the client's packets crossed: MTU, offloads, qdisc.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<env_checks::InterfaceInfo>,
    /// CPU frequency governors and limits, and the clock source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_clock: Option<env_checks::CpuClock>,
    /// A line for each setting that limits a run like this one, naming the fix (also printed
    /// when the run starts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Figures over all runs of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub runs: usize,
    pub complete_runs: usize,
    pub plt_us: Stats,
    pub handshake_us: Stats,
    pub goodput_bps: Stats,
    pub payload_bytes: u64,
    pub objects_completed: u64,
    pub objects_per_s: Stats,
    pub errors: ErrorCounts,
    /// All runs' object latencies merged.
    pub object_latency: HistogramExport,
    pub ttfb: HistogramExport,
    /// With `--duration`: rates over runs, late and dropped requests, histograms merged.
    #[serde(default)]
    pub load: Option<LoadSummary>,
}

impl Summary {
    pub fn of(runs: &[RunReport]) -> Result<Self, HistogramError> {
        let mut latency = LatencyHistogram::new();
        let mut ttfb = LatencyHistogram::new();
        let mut errors = ErrorCounts::default();
        for r in runs {
            latency.merge(&r.object_latency.histogram()?)?;
            ttfb.merge(&r.ttfb.histogram()?)?;
            errors.merge(&r.errors);
        }
        let collect = |f: &dyn Fn(&RunReport) -> Option<f64>| -> Vec<f64> {
            runs.iter().filter_map(f).collect()
        };
        Ok(Self {
            runs: runs.len(),
            complete_runs: runs.iter().filter(|r| r.complete).count(),
            plt_us: Stats::of(&collect(&|r| r.plt_us.map(|v| v as f64))),
            handshake_us: Stats::of(&collect(&|r| r.handshake_us.map(|v| v as f64))),
            goodput_bps: Stats::of(&collect(&|r| r.goodput_bps)),
            payload_bytes: runs
                .iter()
                .fold(0u64, |s, r| s.saturating_add(r.payload_bytes)),
            objects_completed: runs.iter().map(|r| r.objects.completed).sum(),
            // A held load has no page to time: its rate is completions per second.
            objects_per_s: Stats::of(&collect(&|r| match &r.load {
                Some(l) => Some(l.completed_rate),
                None => r
                    .plt_us
                    .filter(|&p| p > 0)
                    .map(|p| r.objects.completed as f64 / (p as f64 / 1e6)),
            })),
            errors,
            object_latency: HistogramExport::from(&latency),
            ttfb: HistogramExport::from(&ttfb),
            load: LoadSummary::of(runs.iter().filter_map(|r| r.load.as_ref()))?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

/// The whole JSON document `--json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: String,
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// Wall-clock start, RFC 3339. Wall-clock figures are few (this, a run's `started_unix_us`,
    /// `start`): every duration is measured on the monotonic clock.
    pub started_at: String,
    pub command: Vec<String>,
    /// The validated configuration the run used.
    pub config: RunConfig,
    pub environment: Environment,
    /// True when every run fetched every object without error.
    pub complete: bool,
    /// Set when the run stopped before all runs were attempted (e.g. target unreachable).
    pub aborted: Option<String>,
    /// The emulated link (spec, backend, commands run, forwarder counters), with `--link`.
    pub link: Option<LinkReport>,
    /// With `--link-b`: the server's segment beyond the middle host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_b: Option<LinkReport>,
    pub summary: Summary,
    pub runs: Vec<RunReport>,
    /// With `--shard`: which shard, how its index was found, and its share of the whole
    /// (`config` holds the whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRecord>,
    /// With `--start-at`: the barrier and how close to it this copy started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartRecord>,
    /// Written by `qbench merge`: the shards it adds up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergeInfo>,
    /// With `--fail-if`: each condition, what the report held for it, and whether it failed
    /// (the command then exits with status 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<thresholds::ThresholdOutcome>,
}

/// A shard's part of the whole workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardRecord {
    pub index: u32,
    pub count: u32,
    /// The launcher's variable `--shard auto/N` read the index from.
    pub source: Option<String>,
    pub connections: u32,
    /// Requests of one pass (none for a held load, which cycles through the whole mix).
    pub requests: Option<u64>,
    /// Open loop: this shard's requests per second, and where its schedule starts in the
    /// whole one (microseconds).
    pub rate: Option<f64>,
    pub phase_us: Option<u64>,
    pub max_inflight: Option<u32>,
}

/// What a report says about how it was produced, fixed before the first run.
#[derive(Debug, Clone)]
pub struct ReportMeta {
    pub tool: ToolInfo,
    pub started_at: String,
    pub command: Vec<String>,
    pub config: RunConfig,
    pub environment: Environment,
}

/// Why a file is not a run report this version can read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("not JSON of a qbench run report: {0}")]
    Json(#[from] serde_json::Error),
    #[error("schema `{0}` is not a qbench run report ({SCHEMA})")]
    Schema(String),
    #[error("run report version {0}; this qbench reads version {SCHEMA_VERSION} (run it again, or read it with the qbench that wrote it)")]
    Version(u32),
    #[error("histogram `{field}`: {message}")]
    Histogram { field: String, message: String },
}

impl Report {
    /// Parses a report, refusing other schemas and versions by their header alone.
    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        #[derive(Deserialize, schemars::JsonSchema)]
        struct Header {
            schema: String,
            schema_version: u32,
        }
        let h: Header = serde_json::from_str(text)?;
        if h.schema != SCHEMA {
            return Err(ReportError::Schema(h.schema));
        }
        if h.schema_version != SCHEMA_VERSION {
            return Err(ReportError::Version(h.schema_version));
        }
        let doc: serde_json::Value = serde_json::from_str(text)?;
        if let Some((field, message)) = histograms_read::first_corrupt(&doc) {
            return Err(ReportError::Histogram { field, message });
        }
        Ok(serde_json::from_value(doc)?)
    }

    pub fn new(
        meta: ReportMeta,
        runs: Vec<RunReport>,
        expected_runs: usize,
        aborted: Option<String>,
    ) -> Result<Self, HistogramError> {
        let ReportMeta {
            tool,
            started_at,
            command,
            config,
            environment,
        } = meta;
        let summary = Summary::of(&runs)?;
        let complete =
            aborted.is_none() && runs.len() == expected_runs && runs.iter().all(|r| r.complete);
        Ok(Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            tool,
            started_at,
            command,
            config,
            environment,
            complete,
            aborted,
            link: None,
            link_b: None,
            summary,
            runs,
            shard: None,
            start: None,
            merged: None,
            thresholds: Vec::new(),
        })
    }
}

impl RunReport {
    /// Whether the run's client ran under a quota still in force at its end, so that its
    /// saturation was asked for.
    pub fn cpu_limited(&self) -> bool {
        self.client_cpu
            .as_ref()
            .is_some_and(|c| c.fraction.is_some() && c.quota_us.is_some())
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    #[test]
    fn cpu_per_gb_and_per_busy_core() {
        let c = CpuTimes::new(0.75, 0.25);
        let s = CpuTimes::new(0.5, 0.0);
        let r = RunCpu::new(c, Some(s), 3_000_000_000);
        assert_eq!(r.client_s_per_gb, Some(1.0 / 3.0));
        assert_eq!(r.server_s_per_gb, Some(0.5 / 3.0));
        // 24 Gbit over 1.5 CPU-seconds.
        assert_eq!(r.gbit_per_busy_core, Some(16.0));
        let remote = RunCpu::new(c, None, 1_000_000_000);
        assert_eq!(
            (remote.server_s_per_gb, remote.gbit_per_busy_core),
            (None, Some(8.0))
        );
        let empty = RunCpu::new(c, Some(s), 0);
        assert_eq!((empty.client_s_per_gb, empty.server_s_per_gb), (None, None));
    }

    #[test]
    fn counters_subtract_and_add_only_where_both_sides_have_them() {
        let mut a = CpuTimes::zero_counted();
        a.minor_faults = Some(10);
        a.voluntary_switches = Some(7);
        let mut b = CpuTimes::zero_counted();
        b.minor_faults = Some(4);
        b.voluntary_switches = Some(9);
        let d = a.since(&b);
        // A counter that went backwards (a thread gone) clamps at zero.
        assert_eq!((d.minor_faults, d.voluntary_switches), (Some(6), Some(0)));
        assert_eq!(a.plus(&b).minor_faults, Some(14));
        let bare = CpuTimes::new(1.0, 0.0);
        assert_eq!(a.since(&bare).minor_faults, None);
        assert_eq!(bare.plus(&a).voluntary_switches, None);
        assert_eq!(a.plus(&bare).user_s, 1.0);
    }
}
