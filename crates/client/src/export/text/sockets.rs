//! What full socket buffers dropped and TCP sent again during the runs, from the kernel's own
//! counters: drops that happened at a socket, named apart from the link's and the senders'.

use qbench_core::report::net_counters::{NetCounters, NetScope};
use qbench_core::Report;

use super::numbers::count;

/// A buffer size as the kernel's are set, in binary units where it is whole in one.
fn binary(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The runs' counters added up, `None` where no run read them.
pub(super) fn summary(report: &Report) -> Option<String> {
    let read: Vec<_> = report.runs.iter().filter_map(|r| r.net).collect();
    let first = read.first()?;
    let sum = |f: fn(&qbench_core::report::net_counters::RunNetCounters) -> Option<NetCounters>| {
        read.iter()
            .filter_map(f)
            .fold(None, |acc: Option<NetCounters>, c| {
                Some(acc.map_or(c, |a| a.plus(&c)))
            })
    };
    let client = sum(|r| Some(r.client))?;
    let server = sum(|r| r.server);
    let whose = match first.scope {
        NetScope::Namespaces => "each namespace's kernel counters",
        NetScope::Host => "the host's kernel counters, every program's",
    };
    let runs = match read.len() {
        1 => String::new(),
        n => format!(", {n} runs"),
    };
    let buffers = |c: &NetCounters| {
        format!(
            "{} receiving, {} sending",
            count(c.udp_rcvbuf_errors),
            count(c.udp_sndbuf_errors)
        )
    };
    let granted = match (first.client_udp_rcvbuf, first.server_udp_rcvbuf) {
        (None, None) => String::new(),
        (c, s) => {
            let b = |v: Option<u64>| v.map_or("-".to_string(), binary);
            format!(
                "; UDP receive buffers granted: client {}, server {}",
                b(c),
                b(s)
            )
        }
    };
    let line = match server {
        Some(s) => format!(
            "full buffers dropped {} datagrams (client {}; server {}); TCP sent {} segments again (client {}, server {}) ({whose}{runs})",
            count(client.buffer_drops().saturating_add(s.buffer_drops())),
            buffers(&client),
            buffers(&s),
            count(client.tcp_retrans_segs.saturating_add(s.tcp_retrans_segs)),
            count(client.tcp_retrans_segs),
            count(s.tcp_retrans_segs),
        ),
        None => format!(
            "full buffers dropped {} datagrams ({}); TCP sent {} segments again ({whose}{runs})",
            count(client.buffer_drops()),
            buffers(&client),
            count(client.tcp_retrans_segs),
        ),
    };
    Some(format!("{line}{granted}"))
}
