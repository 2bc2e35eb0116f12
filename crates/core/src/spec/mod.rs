//! What a run measures, as typed data: the command line, a scenario cell and a report's
//! `config` all come down to these. Output paths are not part of them.

pub mod bounds;
pub mod cpulimit;
pub mod delivery_trace;
pub mod input;
pub mod knobs;
pub mod link;
pub mod link_bounds;
pub mod load;
pub mod quic_knobs;
pub mod rounds;
pub mod server_cpu;
pub mod shard;
pub mod start;
pub mod threshold;
pub mod workload;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::spec::cpulimit::{CpuQuota, CpuSet};
use crate::spec::link::LinkSpec;
use crate::spec::load::Load;
use crate::spec::quic_knobs::QuicKnobs;
use crate::spec::workload::Workload;
use crate::units::ByteSize;
use crate::wire::{CcAlgo, Protocol};

/// Everything that decides one configuration's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSpec {
    pub proto: Protocol,
    /// `None` with `--url`.
    pub objects: Option<Workload>,
    /// Concurrent requests per connection; `None` = all at once.
    pub streams: Option<u32>,
    pub connections: u32,
    pub runs: u32,
    pub reuse: bool,
    pub resume: bool,
    pub zero_rtt: bool,
    pub verify: bool,
    #[serde(rename = "timeout_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub timeout: Duration,
    /// Sender congestion control of the in-process server; `None` for remote servers.
    pub cc: Option<CcAlgo>,
    pub cwnd_cap: Option<u32>,
    pub initial_cwnd: Option<u32>,
    /// Packets a later one may overtake before an earlier one is declared lost: quinn's
    /// `packet_threshold` (both ends), and for TCP the server namespace's
    /// `net.ipv4.tcp_reordering` (with `--link`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_threshold: Option<u32>,
    /// QUIC's time threshold: a packet sent this many RTTs before one that was acknowledged
    /// is declared lost (quinn's `time_threshold`, RFC 9002's kTimeThreshold, 9/8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_time_threshold: Option<f64>,
    /// `--client-cpu`: the client's threads may use this share of one core (a CFS quota);
    /// the in-process server's are not limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<f64>,
    /// `--client-cpuset`: the CPUs the client's threads are pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpuset: Option<CpuSet>,
    pub rwnd: Option<ByteSize>,
    /// `--quic`: QUIC stack settings of both ends (h3 only).
    #[serde(default, skip_serializing_if = "QuicKnobs::is_empty")]
    pub quic: QuicKnobs,
    #[serde(rename = "sample_interval_us", with = "us")]
    #[schemars(with = "u64")]
    pub sample_interval: Duration,
    pub telemetry: bool,
    pub link: Option<LinkSpec>,
    /// With `link_b`, `link` is the client's segment (`--link-a`) and this the server's: a
    /// middle host joins them, where `proxy` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_b: Option<LinkSpec>,
    /// `--proxy h2|h3`: fetch through `qbench proxy` on the middle host, which relays over its
    /// own connection of this protocol; `None`: straight to the server, across both segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Protocol>,
    pub client_threads: u32,
    pub server_threads: u32,
    /// `--server-cpu`: the in-process server's threads get this share of a core, in slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<server_cpu::ServerCpu>,
    /// `--duration` (and `--rate`): hold a load instead of fetching `objects` once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
    /// `--interval`: report what completed in each interval of this length.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "interval_ms",
        with = "crate::serde_ms::opt_ms"
    )]
    #[schemars(with = "Option<u64>")]
    pub interval: Option<Duration>,
    /// `--shard I/N`: this copy does shard I's part of the workload above (which is the
    /// whole's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<shard::Shard>,
    /// `--video`: play a video over one connection instead of fetching `objects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<crate::video::VideoSpec>,
    /// `--page`: replay a recorded page instead of fetching `objects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<crate::page::PageSpec>,
    /// `--client`: a third-party program fetches the objects instead of qbench's clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<crate::client_program::ClientProgram>,
    /// `--server`: a third-party program serves the objects instead of the in-process
    /// qbench-server, behind the same link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::server_program::ServerProgram>,
}

/// The defaults of `qbench` without flags.
impl Default for RunSpec {
    fn default() -> Self {
        Self {
            proto: Protocol::H3,
            objects: Some(Workload::default()),
            streams: None,
            connections: 1,
            runs: 1,
            reuse: false,
            resume: false,
            zero_rtt: false,
            verify: false,
            timeout: Duration::from_secs(10),
            cc: None,
            cwnd_cap: None,
            initial_cwnd: None,
            reorder_threshold: None,
            reorder_time_threshold: None,
            client_cpu: None,
            client_cpuset: None,
            rwnd: None,
            quic: QuicKnobs::default(),
            sample_interval: Duration::from_millis(10),
            telemetry: true,
            link: None,
            link_b: None,
            proxy: None,
            client_threads: 1,
            server_threads: 1,
            server_cpu: None,
            load: None,
            interval: None,
            shard: None,
            video: None,
            page: None,
            client: None,
            server: None,
        }
    }
}

/// What one side of a comparison sets differently from the other. Declared once: the CLI's
/// `--a.X`/`--b.X` flags, scenario files and labels all go through it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideOverrides {
    pub cc: Option<CcAlgo>,
    pub cwnd_cap: Option<u32>,
    pub initial_cwnd: Option<u32>,
    pub rwnd: Option<ByteSize>,
    pub connections: Option<u32>,
    pub streams: Option<u32>,
    /// `--a.client-cpu`: this side's share of a core, or `none` where the common flag sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<CpuQuota>,
    /// `--a.proxy`: through the middle host's proxy (h2, h3), or `none` (direct).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyChoice>,
    /// `--a.client`: this side's client program, or `qbench` where the common flag names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<crate::client_program::ClientChoice>,
    /// `--a.server`: this side's server program, or `qbench` where the common flag names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::server_program::ServerChoice>,
}

/// One side's `--a.proxy`: relay over h2 or h3, or go direct where the common flag says proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProxyChoice {
    None,
    H2,
    H3,
}

impl ProxyChoice {
    pub fn protocol(self) -> Option<Protocol> {
        match self {
            Self::None => None,
            Self::H2 => Some(Protocol::H2),
            Self::H3 => Some(Protocol::H3),
        }
    }
}

impl std::str::FromStr for ProxyChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "none" => Ok(Self::None),
            "h2" => Ok(Self::H2),
            "h3" => Ok(Self::H3),
            other => Err(format!("`{other}`: h2, h3 or none")),
        }
    }
}

impl std::fmt::Display for ProxyChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::H2 => "h2",
            Self::H3 => "h3",
        })
    }
}

/// `qbench compare`: two configurations, back to back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareSpec {
    pub base: RunSpec,
    /// Protocols of sides A and B.
    pub protos: (Protocol, Protocol),
    /// Rounds to run; with `auto_rounds`, at most.
    pub rounds: u32,
    /// `--rounds auto`: the rule that stops the rounds once the difference is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rounds: Option<rounds::AutoRounds>,
    pub a: SideOverrides,
    pub b: SideOverrides,
}

impl CompareSpec {
    pub fn sides(&self) -> (RunSpec, RunSpec) {
        (
            self.a.apply(&self.base, self.protos.0),
            self.b.apply(&self.base, self.protos.1),
        )
    }

    /// Each side's label; a QUIC side names the `--quic` settings it runs with.
    pub fn labels(&self) -> (String, String) {
        let label = |o: &SideOverrides, p: Protocol| match p.is_quic() && !self.base.quic.is_empty()
        {
            true => format!("{} quic={}", o.label(p), self.base.quic),
            false => o.label(p),
        };
        let (a, b) = (label(&self.a, self.protos.0), label(&self.b, self.protos.1));
        // An A/A control: the same configuration twice, told apart by its place.
        if a == b {
            return (format!("{a} (A)"), format!("{b} (B)"));
        }
        (a, b)
    }
}

/// `qbench compete`: flows of several protocols at once through one bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompeteSpec {
    pub base: RunSpec,
    /// Protocols and how many flows of each.
    pub flows: Vec<(Protocol, u32)>,
}

/// `--reorder-time-threshold`: a multiple of the RTT from 1 to 10 (RFC 9002 recommends 9/8).
pub fn parse_time_threshold(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if bounds::TIME_THRESHOLD.contains(v) => Ok(v),
        _ => Err(format!(
            "`{s}`: a multiple of the RTT from 1 to 10 (RFC 9002's is 1.125)"
        )),
    }
}

/// Bounds on `PROTO:COUNT` flows.
pub const MAX_FLOWS_PER_PROTOCOL: u32 = 64;

pub use bounds::{MAX_CONNECTIONS, MAX_THREADS};

/// `h3:1,h2:2`: protocols and how many flows of each (a bare protocol is one flow).
pub fn parse_flows(s: &str) -> Result<Vec<(Protocol, u32)>, String> {
    s.split(',')
        .map(|item| {
            let (p, n) = item.split_once(':').unwrap_or((item, "1"));
            let proto: Protocol = p.parse().map_err(|e| format!("{e}"))?;
            let n: u32 = n
                .trim()
                .parse()
                .map_err(|_| format!("`{n}` is not a flow count"))?;
            if n == 0 || n > MAX_FLOWS_PER_PROTOCOL {
                return Err(format!(
                    "`{item}`: 1 to {MAX_FLOWS_PER_PROTOCOL} flows per protocol"
                ));
            }
            Ok((proto, n))
        })
        .collect()
}

/// Host and port of an HTTPS origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Origin {
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// `host:port` with IPv6 literals bracketed, as in a URI authority.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Whom a run fetches from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// The matched server, started in this process on loopback.
    InProcess,
    /// A remote qbench-server: objects are `/bytes/{n}`.
    Server { origin: Origin },
    /// Arbitrary resources on any HTTPS server.
    Urls {
        origin: Origin,
        urls: Vec<String>,
        repeat: u32,
    },
}

mod us {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_to_one_side_and_name_it() {
        let base = RunSpec {
            zero_rtt: true,
            resume: true,
            ..RunSpec::default()
        };
        let o = SideOverrides {
            cc: Some(CcAlgo::Bbr),
            cwnd_cap: Some(430),
            ..SideOverrides::default()
        };
        let tcp = o.apply(&base, Protocol::H2);
        assert_eq!(
            (tcp.proto, tcp.zero_rtt, tcp.resume),
            (Protocol::H2, false, true)
        );
        assert_eq!((tcp.cc, tcp.cwnd_cap), (Some(CcAlgo::Bbr), Some(430)));
        assert!(o.apply(&base, Protocol::H3).zero_rtt);
        assert_eq!(o.label(Protocol::H3), "h3 cc=bbr cwnd-cap=430");
        assert_eq!(SideOverrides::default().label(Protocol::H1), "h1");
    }

    #[test]
    fn flows() {
        assert_eq!(
            parse_flows("h3:1,h2:2,h1").unwrap(),
            vec![(Protocol::H3, 1), (Protocol::H2, 2), (Protocol::H1, 1)]
        );
        for bad in ["", "h4:1", "h3:0", "h3:65", "h3:x", "h3:1,"] {
            assert!(parse_flows(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn flows_parser_never_panics(s in "\\PC{0,40}") {
            let _ = parse_flows(&s);
        }

        #[test]
        fn time_threshold_parser_never_panics(s in "\\PC{0,20}") {
            let _ = parse_time_threshold(&s);
        }
    }

    #[test]
    fn time_thresholds() {
        assert_eq!(parse_time_threshold("1.125"), Ok(1.125));
        assert_eq!(parse_time_threshold("4"), Ok(4.0));
        for bad in ["", "0.9", "11", "nan", "inf", "x"] {
            assert!(parse_time_threshold(bad).is_err(), "{bad}");
        }
    }
}
