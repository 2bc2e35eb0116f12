//! What an emulated link was, as a run report records it: the spec, the backend chosen, what
//! was probed, the namespaces, every command run and the forwarders' counters.

use serde::{Deserialize, Serialize};

// The link's drop counters are what a run's noise record holds, so they sit with it; a link
// report lists them too.
use crate::spec::link::LinkSpec;
pub use crate::stats::noise::{ForwarderStats, LinkDrops, FORWARDER_DOWN, LATE_STEPS_US};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// tbf + netem on the router (kernels with sch_netem).
    Netem,
    /// tbf for rate, nftables for loss, a userspace TUN forwarder for delay and jitter.
    Userspace,
    /// Earliest departure time: a tc BPF program stamps each packet's departure (rate and
    /// delay), sch_fq releases it then; nftables for loss.
    Edt,
}

/// What the kernel and machine offered when the link was built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Capabilities {
    pub root: bool,
    pub ip: bool,
    pub tc: bool,
    pub nft: bool,
    pub ethtool: bool,
    pub tun: bool,
    pub netem: bool,
    /// sch_fq loads (the edt backend's release queue).
    #[serde(default)]
    pub fq: bool,
    /// qbench's edt program loads through tc on a clsact egress hook.
    #[serde(default)]
    pub tc_bpf: bool,
}

/// The three namespaces of one topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Names {
    pub id: String,
    pub client: String,
    pub router: String,
    pub server: String,
    /// The third octet of the client side's /24 (the server side's is the next one): 1 for a
    /// link of its own (198.18.1.0/24 and 198.18.2.0/24), 3 for a chain's second segment.
    #[serde(default = "first_net", skip_serializing_if = "is_first_net")]
    pub net: u8,
    /// The client namespace is the server namespace of the segment before (a chain's middle
    /// host): this link neither makes nor deletes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shares_client: bool,
}

fn first_net() -> u8 {
    1
}

fn is_first_net(n: &u8) -> bool {
    *n == 1
}

impl Names {
    pub fn new(id: &str) -> Self {
        Self {
            id: id.into(),
            client: format!("qb-{id}-c"),
            router: format!("qb-{id}-r"),
            server: format!("qb-{id}-s"),
            net: 1,
            shares_client: false,
        }
    }

    /// The second segment of a chain: its client side is `near`'s server namespace, and its
    /// addresses are the next two /24s.
    pub fn beyond(id: &str, near: &Self) -> Self {
        Self {
            client: near.server.clone(),
            net: near.net.saturating_add(2),
            shares_client: true,
            ..Self::new(id)
        }
    }

    fn addr(&self, side: u8, host: u8) -> String {
        format!("198.18.{}.{host}", self.net.saturating_add(side))
    }

    pub fn client_addr(&self) -> String {
        self.addr(0, 2)
    }

    pub fn router_client_side(&self) -> String {
        self.addr(0, 1)
    }

    pub fn router_server_side(&self) -> String {
        self.addr(1, 1)
    }

    pub fn server_addr(&self) -> String {
        self.addr(1, 2)
    }

    pub fn client_net(&self) -> String {
        self.addr(0, 0) + "/24"
    }

    pub fn server_net(&self) -> String {
        self.addr(1, 0) + "/24"
    }

    /// The namespaces this link makes (and deletes).
    pub fn own(&self) -> Vec<&String> {
        let mut v = vec![&self.router, &self.server];
        if !self.shares_client {
            v.insert(0, &self.client);
        }
        v
    }

    /// Whether `ns` looks like one of ours (`qb-<hex id>-c|r|s`).
    pub fn is_ours(ns: &str) -> bool {
        let Some(rest) = ns.strip_prefix("qb-") else {
            return false;
        };
        let Some((id, role)) = rest.rsplit_once('-') else {
            return false;
        };
        !id.is_empty()
            && id.chars().all(|c| c.is_ascii_hexdigit())
            && matches!(role, "c" | "r" | "s")
    }
}

/// One rate change as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateChange {
    pub t_ms: u64,
    pub direction: String,
    pub rate_bps: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkReport {
    pub spec: LinkSpec,
    pub backend: Backend,
    pub capabilities: Capabilities,
    pub namespaces: Names,
    pub commands: Vec<String>,
    pub forwarders: Vec<(String, ForwarderStats)>,
    pub rate_changes: Vec<RateChange>,
    pub notes: Vec<String>,
    /// The link as measured before the first run, against what was asked (absent when
    /// calibration was turned off, and in reports older than it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::report::calibration::Calibration>,
    /// `compare --recalibrate`: the link measured again before each round after the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recalibrations: Vec<Recalibration>,
}

/// One measurement of the link between rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recalibration {
    /// The round it was taken before (0 is the first).
    pub before_round: u32,
    pub calibration: crate::report::calibration::Calibration,
}

/// What `qbench proxy` on a chain's middle host did during one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProxyRun {
    /// The protocol of its upstream connections.
    pub upstream: crate::wire::Protocol,
    /// Requests relayed, and upstream connections opened and failed.
    pub requests: u64,
    pub connects: u64,
    pub connect_failures: u64,
    /// Request heads sent upstream and response bodies relayed to the client, in bytes.
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Responses whose upstream stream broke.
    pub broken: u64,
    /// CPU time of the proxy's threads.
    pub cpu: crate::report::cpu_times::CpuTimes,
}
