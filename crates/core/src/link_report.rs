//! What an emulated link was, as a run report records it: the spec, the backend chosen, what
//! was probed, the namespaces, every command run and the forwarders' counters.

use serde::{Deserialize, Serialize};

use crate::link::LinkSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// tbf + netem on the router (kernels with sch_netem).
    Netem,
    /// tbf for rate, nftables for loss, a userspace TUN forwarder for delay and jitter.
    Userspace,
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
}

/// The three namespaces of one topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Names {
    pub id: String,
    pub client: String,
    pub router: String,
    pub server: String,
}

impl Names {
    pub fn new(id: &str) -> Self {
        Self {
            id: id.into(),
            client: format!("qb-{id}-c"),
            router: format!("qb-{id}-r"),
            server: format!("qb-{id}-s"),
        }
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

/// Counters of one forwarder. A GSO super-packet counts as one packet; `bytes` excludes the
/// vnet header. `dropped` covers random loss, queue overflow, failed writes and packets still
/// queued when the forwarder stopped. `reordered` counts packets scheduled to leave before a
/// packet that arrived earlier.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForwarderStats {
    pub packets: u64,
    pub bytes: u64,
    pub dropped: u64,
    pub max_queue: usize,
    pub reordered: u64,
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
}
