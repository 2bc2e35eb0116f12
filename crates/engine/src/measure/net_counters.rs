//! The kernel's UDP and TCP counters around a run: each namespace's own with a link (the
//! client's, and the server's at the far end of a chain), the host's without one.

use qbench_core::report::net_counters::{NetCounters, NetScope, RunNetCounters};
use qbench_shaper::Topology;

/// The counters at one moment: the client's, and the server's where it is not the client's.
pub(crate) struct NetReading {
    scope: NetScope,
    client: NetCounters,
    server: Option<NetCounters>,
}

fn in_namespace(ns: &str) -> Option<NetCounters> {
    let text = qbench_shaper::netns::read_net_file(ns, "snmp").ok()?;
    NetCounters::parse_snmp(&text).ok()
}

/// `None` where a namespace's counters cannot be read: a run says nothing rather than a
/// count it cannot vouch for.
pub(crate) fn read(link: Option<&Topology>, link_b: Option<&Topology>) -> Option<NetReading> {
    let Some(first) = link else {
        let text = std::fs::read_to_string("/proc/net/snmp").ok()?;
        return Some(NetReading {
            scope: NetScope::Host,
            client: NetCounters::parse_snmp(&text).ok()?,
            server: None,
        });
    };
    let server = link_b.unwrap_or(first);
    Some(NetReading {
        scope: NetScope::Namespaces,
        client: in_namespace(&first.names().client)?,
        server: Some(in_namespace(&server.names().server)?),
    })
}

/// What a run added, from the readings before and after it, with the receive buffers the
/// client's and the server's UDP sockets were granted.
pub(crate) fn between(
    before: Option<NetReading>,
    after: Option<NetReading>,
    granted: (Option<u64>, Option<u64>),
) -> Option<RunNetCounters> {
    let (a, b) = (before?, after?);
    let server = match (a.server, b.server) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let mut run = RunNetCounters::between(a.scope, (a.client, b.client), server);
    (run.client_udp_rcvbuf, run.server_udp_rcvbuf) = granted;
    Some(run)
}
