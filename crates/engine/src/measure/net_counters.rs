//! The kernel's counters around a run (`/proc/net/snmp`, `netstat` and `dev`): each
//! namespace's own with a link (the client's, and the server's at the far end of a chain), the
//! host's without one.

use qbench_core::report::net_counters::{NetCounters, NetScope, RunNetCounters};
use qbench_shaper::Topology;

/// The counters at one moment: the client's, and the server's where it is not the client's.
pub(crate) struct NetReading {
    scope: NetScope,
    client: NetCounters,
    server: Option<NetCounters>,
}

/// The counters from the files `read` returns: `None` without `snmp`, and `netstat`'s or
/// `dev`'s absent where that file could not be read.
fn counters(read: impl Fn(&str) -> Option<String>) -> Option<NetCounters> {
    let (snmp, netstat, dev) = (read("snmp")?, read("netstat"), read("dev"));
    NetCounters::from_files(&snmp, netstat.as_deref(), dev.as_deref()).ok()
}

fn in_namespace(ns: &str) -> Option<NetCounters> {
    counters(|file| qbench_shaper::netns::read_net_file(ns, file).ok())
}

/// `None` where a namespace's counters cannot be read: a run says nothing rather than a
/// count it cannot vouch for.
pub(crate) fn read(link: Option<&Topology>, link_b: Option<&Topology>) -> Option<NetReading> {
    let Some(first) = link else {
        return Some(NetReading {
            scope: NetScope::Host,
            client: counters(|file| std::fs::read_to_string(format!("/proc/net/{file}")).ok())?,
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

/// The receive and send buffers one end's UDP sockets were granted, in bytes.
pub(crate) type Buffers = (u64, u64);

/// What a run added, from the readings before and after it, with the buffers the client's and
/// the server's UDP sockets were granted.
pub(crate) fn between(
    before: Option<NetReading>,
    after: Option<NetReading>,
    granted: (Option<Buffers>, Option<Buffers>),
) -> Option<RunNetCounters> {
    let (a, b) = (before?, after?);
    let server = match (a.server, b.server) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let mut run = RunNetCounters::between(a.scope, (a.client, b.client), server);
    let (client, server) = granted;
    (run.client_udp_rcvbuf, run.client_udp_sndbuf) = (client.map(|b| b.0), client.map(|b| b.1));
    (run.server_udp_rcvbuf, run.server_udp_sndbuf) = (server.map(|b| b.0), server.map(|b| b.1));
    Some(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(file: &str) -> Option<String> {
        std::fs::read_to_string(format!("/proc/net/{file}")).ok()
    }

    /// Without `snmp` nothing is said; without `netstat` or `dev` what they hold is absent
    /// and the rest is said.
    #[test]
    fn snmp_is_needed_and_the_other_files_are_said_where_read() {
        assert!(counters(|f| host(f).filter(|_| f != "snmp")).is_none());
        let snmp_only = counters(|f| host(f).filter(|_| f == "snmp")).unwrap();
        assert_eq!(
            (
                snmp_only.tcp_ext,
                snmp_only.nic_rx_dropped,
                snmp_only.nic_tx_dropped
            ),
            (None, None, None)
        );
        let all = counters(host).unwrap();
        assert!(all.tcp_ext.is_some(), "{all:?}");
        assert!(all.nic_rx_dropped.is_some() && all.nic_tx_dropped.is_some());
    }

    /// Without a link the host's files are read, every one of them, and a run's difference
    /// keeps them.
    #[test]
    fn the_hosts_reading_holds_every_file() {
        let before = read(None, None).unwrap();
        assert_eq!(before.scope, NetScope::Host);
        assert!(before.server.is_none());
        let run = between(Some(before), read(None, None), (None, Some((4096, 8192)))).unwrap();
        assert_eq!(run.scope, NetScope::Host);
        assert!(run.client.tcp_ext.is_some(), "{run:?}");
        assert!(run.client.nic_rx_dropped.is_some() && run.client.nic_tx_dropped.is_some());
        assert_eq!((run.server, run.server_udp_rcvbuf), (None, Some(4096)));
        assert_eq!(
            (run.server_udp_sndbuf, run.client_udp_sndbuf),
            (Some(8192), None)
        );
    }
}
