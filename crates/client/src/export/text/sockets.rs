//! What full socket buffers dropped and TCP sent again during the runs, from the kernel's own
//! counters: drops that happened at a socket, named apart from the link's and the senders';
//! and beside them where else the kernel saw TCP lose or drop and the interfaces drop.

use qbench_core::report::net_counters::{NetCounters, NetScope, RunNetCounters};
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

/// One side's counters added up over the runs that read them.
fn total(
    read: &[RunNetCounters],
    side: fn(&RunNetCounters) -> Option<NetCounters>,
) -> Option<NetCounters> {
    read.iter()
        .filter_map(side)
        .fold(None, |acc: Option<NetCounters>, c| {
            Some(acc.map_or(c, |a| a.plus(&c)))
        })
}

/// The runs' counters added up, `None` where no run read them.
pub(super) fn summary(report: &Report) -> Option<String> {
    let read: Vec<_> = report.runs.iter().filter_map(|r| r.net).collect();
    let first = read.first()?;
    let client = total(&read, |r| Some(r.client))?;
    let server = total(&read, |r| r.server);
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
    let b = |v: Option<u64>| v.map_or("-".to_string(), binary);
    let granted = match (first.client_udp_rcvbuf, first.server_udp_rcvbuf) {
        (None, None) => String::new(),
        (c, s) => format!(
            "; UDP receive buffers granted: client {}, server {}",
            b(c),
            b(s)
        ),
    };
    let granted = match (first.client_udp_sndbuf, first.server_udp_sndbuf) {
        (None, None) => granted,
        (c, s) => format!("{granted}; send buffers: client {}, server {}", b(c), b(s)),
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

/// `n` and its noun, singular for one.
fn many(n: u64, one: &str, more: &str) -> String {
    match n {
        1 => format!("1 {one}"),
        n => format!("{} {more}", count(n)),
    }
}

/// One side's timeouts and drops that are not zero, in words; empty where all are.
fn named(c: &NetCounters) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(t) = c.tcp_ext {
        if t.tcp_timeouts > 0 {
            let spurious = match t.tcp_spurious_rtos {
                0 => String::new(),
                n => format!(" ({} spurious)", count(n)),
            };
            let timeouts = many(t.tcp_timeouts, "TCP timeout", "TCP timeouts");
            out.push(format!("{timeouts}{spurious}"));
        }
        let at: Vec<String> = [
            (t.tcp_backlog_drop, "backlog full"),
            (t.tcp_rcvq_drop, "receive queue full"),
            (t.tcp_ofo_drop, "out of order"),
            (t.tcp_zero_window_drop, "zero window"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{} {why}", count(n)))
        .collect();
        if !at.is_empty() {
            let segments = many(t.receive_drops(), "TCP segment", "TCP segments");
            out.push(format!("{segments} dropped ({})", at.join(", ")));
        }
        if t.tcp_listen_drops > 0 {
            let attempts = many(
                t.tcp_listen_drops,
                "connection attempt",
                "connection attempts",
            );
            out.push(format!("{attempts} dropped by a listener"));
        }
    }
    let (rx, tx) = (c.nic_rx_dropped.unwrap_or(0), c.nic_tx_dropped.unwrap_or(0));
    if rx > 0 || tx > 0 {
        let packets = many(rx.saturating_add(tx), "packet", "packets");
        out.push(format!(
            "{packets} dropped by interfaces ({} receiving, {} sending)",
            count(rx),
            count(tx)
        ));
    }
    out
}

/// Where else the kernel saw the runs' packets lost or dropped: TCP's timeouts, segments a
/// receiver dropped, the interfaces' drops. `None` where none was, so that a quiet run's
/// summary is as it was.
pub(super) fn kernel_drops(report: &Report) -> Option<String> {
    let read: Vec<_> = report.runs.iter().filter_map(|r| r.net).collect();
    let client = named(&total(&read, |r| Some(r.client))?);
    let line = match total(&read, |r| r.server) {
        Some(server) => [("client", client), ("server", named(&server))]
            .into_iter()
            .filter(|(_, said)| !said.is_empty())
            .map(|(side, said)| format!("{side} {}", said.join(", ")))
            .collect::<Vec<_>>()
            .join("; "),
        None => client.join(", "),
    };
    let whose = match read.first()?.scope {
        NetScope::Namespaces => "",
        NetScope::Host => " (the host's, every program's)",
    };
    (!line.is_empty()).then(|| format!("{line}{whose}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_said_in_the_singular() {
        assert_eq!(
            super::many(1, "TCP timeout", "TCP timeouts"),
            "1 TCP timeout"
        );
        assert_eq!(super::many(2_004, "packet", "packets"), "2,004 packets");
        assert_eq!(super::many(0, "packet", "packets"), "0 packets");
    }
}
