//! The kernel's own UDP and TCP counters (`/proc/net/snmp`) as a run changed them: datagrams a
//! full socket buffer dropped (`RcvbufErrors`, `SndbufErrors`), receive errors, and TCP's
//! retransmitted segments. A drop here happened in a socket buffer, not on the link, and is
//! counted apart from the link's own drops.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NetCountersError {
    #[error("/proc/net/snmp has no `{0}` counter")]
    Missing(&'static str),
    #[error("/proc/net/snmp: `{0}` holds {1} names and {2} values")]
    Uneven(String, usize, usize),
}

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
}

impl NetCounters {
    /// From the text of `/proc/net/snmp`: each protocol's line of names, then its line of
    /// values.
    pub fn parse_snmp(text: &str) -> Result<Self, NetCountersError> {
        let mut values: BTreeMap<String, u64> = BTreeMap::new();
        let mut names: Option<(&str, Vec<&str>)> = None;
        for line in text.lines() {
            let Some((proto, rest)) = line.split_once(':') else {
                continue;
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            match names.take() {
                Some((p, n)) if p == proto => {
                    if n.len() != words.len() {
                        return Err(NetCountersError::Uneven(
                            proto.to_string(),
                            n.len(),
                            words.len(),
                        ));
                    }
                    for (name, v) in n.iter().zip(&words) {
                        // A signed counter (MaxConn is -1) is not one read here.
                        if let Ok(v) = v.parse::<u64>() {
                            values.insert(format!("{proto}.{name}"), v);
                        }
                    }
                }
                _ => names = Some((proto, words)),
            }
        }
        let get = |key: &'static str| {
            values
                .get(key)
                .copied()
                .ok_or(NetCountersError::Missing(key))
        };
        Ok(Self {
            udp_in_datagrams: get("Udp.InDatagrams")?,
            udp_out_datagrams: get("Udp.OutDatagrams")?,
            udp_rcvbuf_errors: get("Udp.RcvbufErrors")?,
            udp_sndbuf_errors: get("Udp.SndbufErrors")?,
            udp_in_errors: get("Udp.InErrors")?,
            tcp_out_segs: get("Tcp.OutSegs")?,
            tcp_retrans_segs: get("Tcp.RetransSegs")?,
        })
    }

    /// `f` of each counter here and its namesake in `other`.
    fn each(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            udp_in_datagrams: f(self.udp_in_datagrams, other.udp_in_datagrams),
            udp_out_datagrams: f(self.udp_out_datagrams, other.udp_out_datagrams),
            udp_rcvbuf_errors: f(self.udp_rcvbuf_errors, other.udp_rcvbuf_errors),
            udp_sndbuf_errors: f(self.udp_sndbuf_errors, other.udp_sndbuf_errors),
            udp_in_errors: f(self.udp_in_errors, other.udp_in_errors),
            tcp_out_segs: f(self.tcp_out_segs, other.tcp_out_segs),
            tcp_retrans_segs: f(self.tcp_retrans_segs, other.tcp_retrans_segs),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
        Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens OutSegs RetransSegs\n\
        Tcp: 1 200 120000 -1 5 21064695 336863\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n\
        Udp: 15107472 526 44747 14218195 44740 3 4\n\
        UdpLite: InDatagrams NoPorts\nUdpLite: 0 0\n";

    #[test]
    fn the_counters_are_read_by_name() {
        let c = NetCounters::parse_snmp(SNMP).unwrap();
        assert_eq!(
            c,
            NetCounters {
                udp_in_datagrams: 15_107_472,
                udp_out_datagrams: 14_218_195,
                udp_rcvbuf_errors: 44_740,
                udp_sndbuf_errors: 3,
                udp_in_errors: 44_747,
                tcp_out_segs: 21_064_695,
                tcp_retrans_segs: 336_863,
            }
        );
        assert_eq!(c.buffer_drops(), 44_743);
    }

    #[test]
    fn a_missing_counter_or_a_short_line_is_named() {
        let no_udp = SNMP.replace("Udp:", "Udq:");
        assert_eq!(
            NetCounters::parse_snmp(&no_udp),
            Err(NetCountersError::Missing("Udp.InDatagrams"))
        );
        let short = SNMP.replace("44740 3 4", "44740 3");
        assert_eq!(
            NetCounters::parse_snmp(&short),
            Err(NetCountersError::Uneven("Udp".into(), 7, 6))
        );
    }

    #[test]
    fn a_run_adds_what_changed_and_a_counter_that_went_back_counts_from_zero() {
        let a = NetCounters::parse_snmp(SNMP).unwrap();
        let mut b = a;
        b.udp_rcvbuf_errors += 10;
        b.tcp_retrans_segs = 2;
        let d = RunNetCounters::between(NetScope::Namespaces, (a, b), None);
        assert_eq!(d.client.udp_rcvbuf_errors, 10);
        assert_eq!(d.client.tcp_retrans_segs, 2);
        assert_eq!(d.client.udp_in_datagrams, 0);
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_counters_or_an_error(text in "(\\PC{0,30}\n){0,8}", names in "[A-Za-z: \n0-9-]{0,200}") {
            let _ = NetCounters::parse_snmp(&text);
            let _ = NetCounters::parse_snmp(&names);
            let _ = NetCounters::parse_snmp(&format!("{SNMP}{names}"));
        }
    }
}
