//! The kernel's own counters as a run changed them: UDP's and TCP's in `/proc/net/snmp`
//! (datagrams a full socket buffer dropped, receive errors, TCP's retransmitted segments),
//! where TCP lost or dropped segments in `/proc/net/netstat`'s `TcpExt`, and what the network
//! interfaces dropped in `/proc/net/dev`. A drop here happened in the kernel of one end, not
//! on the link, and is counted apart from the link's own drops.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One network namespace's counters, or what a run added to them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetCounters {
    /// Datagrams UDP sockets' owners read (QUIC's packets in): one dropped or still queued
    /// is not counted.
    pub udp_in_datagrams: u64,
    pub udp_out_datagrams: u64,
    /// Datagrams dropped because the receiving socket's buffer was full (`RcvbufErrors`):
    /// the receiver did not read fast enough, or its `SO_RCVBUF` (capped by
    /// `net.core.rmem_max`) is small.
    pub udp_rcvbuf_errors: u64,
    /// Datagrams not sent because the sending socket's buffer was full (`SndbufErrors`).
    pub udp_sndbuf_errors: u64,
    /// Datagrams received and dropped for any reason (`InErrors`): the buffer drops above,
    /// bad checksums, memory pressure.
    pub udp_in_errors: u64,
    /// TCP segments sent, retransmissions excluded (`OutSegs`).
    pub tcp_out_segs: u64,
    /// TCP segments sent again (`RetransSegs`).
    pub tcp_retrans_segs: u64,
    /// Where TCP lost or dropped segments (`/proc/net/netstat`); absent where it cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_ext: Option<TcpExtCounters>,
    /// Packets interfaces other than `lo` dropped receiving (`/proc/net/dev`): full backlogs' too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_rx_dropped: Option<u64>,
    /// Packets interfaces other than `lo` dropped sending (`/proc/net/dev`); a qdisc's are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_tx_dropped: Option<u64>,
}

/// Where TCP lost or dropped segments: `/proc/net/netstat`'s `TcpExt` counters, each 0 on a
/// kernel too old to have it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TcpExtCounters {
    /// Retransmitted segments lost again (`TCPLostRetransmit`).
    pub tcp_lost_retransmit: u64,
    /// Retransmission timer expiries (`TCPTimeouts`): losses found only after a stall.
    pub tcp_timeouts: u64,
    /// Timeouts later found spurious (`TCPSpuriousRTOs`): the segment was late, not lost.
    pub tcp_spurious_rtos: u64,
    /// Segments dropped at a full socket backlog while its owner held it (`TCPBacklogDrop`).
    pub tcp_backlog_drop: u64,
    /// In-order segments dropped for want of receive memory (`TCPRcvQDrop`).
    pub tcp_rcvq_drop: u64,
    /// Segments queued out of order (`TCPOFOQueue`): a hole before them, not a drop.
    pub tcp_ofo_queue: u64,
    /// Out-of-order segments dropped for want of receive memory (`TCPOFODrop`).
    pub tcp_ofo_drop: u64,
    /// Segments dropped because the receive window was zero (`TCPZeroWindowDrop`).
    pub tcp_zero_window_drop: u64,
    /// Connection attempts a listener dropped, a full accept queue among them (`ListenDrops`).
    pub tcp_listen_drops: u64,
}

/// Where the counters were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetScope {
    /// The link's client and server namespaces: the run's own sockets and nothing else.
    Namespaces,
    /// The host's counters, shared with every other program on it (no `--link`): another
    /// program's traffic during the run is counted too.
    Host,
}

/// What a run added to the kernel's counters: the client's and the server's namespaces with
/// `--link`, the host's without (then `server` is absent: the same counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunNetCounters {
    pub scope: NetScope,
    pub client: NetCounters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<NetCounters>,
    /// The receive buffer the kernel granted the client's and the in-process server's UDP
    /// sockets, read back (`SO_RCVBUF`: twice what was asked, capped by `net.core.rmem_max`
    /// unless forced); absent without QUIC sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_udp_rcvbuf: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_udp_rcvbuf: Option<u64>,
    /// The send buffer they were granted (`SO_SNDBUF`, capped by `net.core.wmem_max`
    /// unless forced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_udp_sndbuf: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_udp_sndbuf: Option<u64>,
}

impl NetCounters {
    /// `f` of each counter here and its namesake in `other`; one absent from either side is
    /// absent from the result, which cannot vouch for it.
    fn each(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        let both = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| f(a, b));
        Self {
            udp_in_datagrams: f(self.udp_in_datagrams, other.udp_in_datagrams),
            udp_out_datagrams: f(self.udp_out_datagrams, other.udp_out_datagrams),
            udp_rcvbuf_errors: f(self.udp_rcvbuf_errors, other.udp_rcvbuf_errors),
            udp_sndbuf_errors: f(self.udp_sndbuf_errors, other.udp_sndbuf_errors),
            udp_in_errors: f(self.udp_in_errors, other.udp_in_errors),
            tcp_out_segs: f(self.tcp_out_segs, other.tcp_out_segs),
            tcp_retrans_segs: f(self.tcp_retrans_segs, other.tcp_retrans_segs),
            tcp_ext: self.tcp_ext.zip(other.tcp_ext).map(|(a, b)| a.each(&b, &f)),
            nic_rx_dropped: both(self.nic_rx_dropped, other.nic_rx_dropped),
            nic_tx_dropped: both(self.nic_tx_dropped, other.nic_tx_dropped),
        }
    }

    /// What happened since `before`. A counter that went back (a namespace made anew) counts
    /// from zero.
    pub fn since(&self, before: &Self) -> Self {
        self.each(before, |a, b| a.checked_sub(b).unwrap_or(a))
    }

    /// Both counted together (two shards' clients).
    pub fn plus(&self, other: &Self) -> Self {
        self.each(other, u64::saturating_add)
    }

    /// Datagrams a full socket buffer dropped, receiving or sending.
    pub fn buffer_drops(&self) -> u64 {
        self.udp_rcvbuf_errors
            .saturating_add(self.udp_sndbuf_errors)
    }
}

impl TcpExtCounters {
    /// `f` of each counter here and its namesake in `other`.
    fn each(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            tcp_lost_retransmit: f(self.tcp_lost_retransmit, other.tcp_lost_retransmit),
            tcp_timeouts: f(self.tcp_timeouts, other.tcp_timeouts),
            tcp_spurious_rtos: f(self.tcp_spurious_rtos, other.tcp_spurious_rtos),
            tcp_backlog_drop: f(self.tcp_backlog_drop, other.tcp_backlog_drop),
            tcp_rcvq_drop: f(self.tcp_rcvq_drop, other.tcp_rcvq_drop),
            tcp_ofo_queue: f(self.tcp_ofo_queue, other.tcp_ofo_queue),
            tcp_ofo_drop: f(self.tcp_ofo_drop, other.tcp_ofo_drop),
            tcp_zero_window_drop: f(self.tcp_zero_window_drop, other.tcp_zero_window_drop),
            tcp_listen_drops: f(self.tcp_listen_drops, other.tcp_listen_drops),
        }
    }

    /// Segments a receiver dropped: at a full backlog or receive queue, out of order for want
    /// of memory, or beyond a zero window.
    pub fn receive_drops(&self) -> u64 {
        [
            self.tcp_backlog_drop,
            self.tcp_rcvq_drop,
            self.tcp_ofo_drop,
            self.tcp_zero_window_drop,
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }
}

impl RunNetCounters {
    /// Between two readings of each side (`server` absent where it is the client's).
    pub fn between(
        scope: NetScope,
        client: (NetCounters, NetCounters),
        server: Option<(NetCounters, NetCounters)>,
    ) -> Self {
        Self {
            scope,
            client: client.1.since(&client.0),
            server: server.map(|(a, b)| b.since(&a)),
            client_udp_rcvbuf: None,
            server_udp_rcvbuf: None,
            client_udp_sndbuf: None,
            server_udp_sndbuf: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(base: u64) -> NetCounters {
        NetCounters {
            udp_in_datagrams: base,
            udp_rcvbuf_errors: base,
            tcp_retrans_segs: base,
            tcp_ext: Some(TcpExtCounters {
                tcp_timeouts: base,
                tcp_backlog_drop: base,
                tcp_ofo_queue: base,
                ..TcpExtCounters::default()
            }),
            nic_rx_dropped: Some(base),
            nic_tx_dropped: Some(base),
            ..NetCounters::default()
        }
    }

    #[test]
    fn a_run_adds_what_changed_and_a_counter_that_went_back_counts_from_zero() {
        let a = reading(1_000);
        let mut b = a;
        b.udp_rcvbuf_errors += 10;
        b.tcp_retrans_segs = 2;
        let ext = b.tcp_ext.as_mut().unwrap();
        ext.tcp_timeouts += 3;
        ext.tcp_ofo_queue = 7;
        b.nic_rx_dropped = Some(1_040);
        let d = RunNetCounters::between(NetScope::Namespaces, (a, b), None);
        assert_eq!(d.client.udp_rcvbuf_errors, 10);
        assert_eq!(d.client.tcp_retrans_segs, 2);
        assert_eq!(d.client.udp_in_datagrams, 0);
        let ext = d.client.tcp_ext.unwrap();
        assert_eq!((ext.tcp_timeouts, ext.tcp_ofo_queue), (3, 7));
        assert_eq!(ext.tcp_backlog_drop, 0);
        assert_eq!(d.client.nic_rx_dropped, Some(40));
        assert_eq!(d.client.nic_tx_dropped, Some(0));
    }

    /// A file read at one end of the run and not the other gives no difference at all,
    /// rather than one from zero.
    #[test]
    fn a_counter_read_only_once_is_absent_from_the_run() {
        let a = reading(5);
        let b = NetCounters {
            tcp_ext: None,
            nic_rx_dropped: None,
            nic_tx_dropped: None,
            ..reading(9)
        };
        for d in [b.since(&a), a.since(&b), a.plus(&b)] {
            assert_eq!(
                (d.tcp_ext, d.nic_rx_dropped, d.nic_tx_dropped),
                (None, None, None)
            );
        }
        assert_eq!(b.since(&a).udp_rcvbuf_errors, 4);
    }

    #[test]
    fn two_readings_add_up_field_by_field_without_overflowing() {
        let s = reading(3).plus(&reading(u64::MAX - 1));
        assert_eq!(s.udp_rcvbuf_errors, u64::MAX);
        assert_eq!(s.nic_tx_dropped, Some(u64::MAX));
        let s = reading(3).plus(&reading(4));
        let ext = s.tcp_ext.unwrap();
        assert_eq!((ext.tcp_timeouts, ext.tcp_backlog_drop), (7, 7));
        assert_eq!(ext.receive_drops(), 7);
        assert_eq!((s.udp_in_datagrams, s.nic_rx_dropped), (7, Some(7)));
    }

    /// A report written before these counters existed reads as one whose files were not read,
    /// and one without them writes nothing for them.
    #[test]
    fn older_reports_read_and_absent_counters_are_not_written() {
        let old = r#"{"scope":"namespaces","client":{"udp_in_datagrams":1,"udp_out_datagrams":2,
            "udp_rcvbuf_errors":3,"udp_sndbuf_errors":4,"udp_in_errors":5,"tcp_out_segs":6,
            "tcp_retrans_segs":7}}"#;
        let r: RunNetCounters = serde_json::from_str(old).unwrap();
        assert_eq!(r.client.tcp_retrans_segs, 7);
        assert_eq!(r.client.tcp_ext, None);
        assert_eq!(r.client.nic_rx_dropped, None);
        let text = serde_json::to_string(&r.client).unwrap();
        assert!(
            !text.contains("tcp_ext") && !text.contains("nic_"),
            "{text}"
        );
        let full = serde_json::to_value(reading(2)).unwrap();
        assert_eq!(full["tcp_ext"]["tcp_timeouts"], 2);
        assert_eq!(full["nic_rx_dropped"], 2);
    }
}
