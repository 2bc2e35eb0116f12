//! How the in-process server's sender starts each connection: the two settings that decide
//! how many round trips a small object takes, recorded because the stacks' defaults differ
//! (quinn starts at 12,000 bytes and spends part of it on MTU probes; Linux TCP at 10
//! segments of the MSS).

use serde::{Deserialize, Serialize};

/// The sender's start, as the in-process server was configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SenderSetup {
    /// Initial congestion window in bytes: quinn's controller at QUIC's 1200-byte initial
    /// packets (h3), or `initial_cwnd_packets` segments of the path's MSS (h1/h2; IPv4 with
    /// TCP timestamps: the MTU less 52 bytes).
    pub initial_cwnd_bytes: u64,
    /// The same in packets: 1200-byte QUIC packets, or TCP segments.
    pub initial_cwnd_packets: u64,
    /// `--initial-cwnd`, or the stack's default.
    pub initial_cwnd_from: SetBy,
    /// Whether the sender probes for a larger path MTU: quinn's DPLPMTUD (h3; its probes use
    /// part of the initial window), or TCP's packetization-layer probing
    /// (`net.ipv4.tcp_mtu_probing` in the server's namespace, h1/h2; off by default).
    pub mtu_discovery: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SetBy {
    Flag,
    StackDefault,
}

/// Linux TCP's initial window without a route's `initcwnd` (TCP_INIT_CWND).
pub const TCP_DEFAULT_INITIAL_SEGMENTS: u64 = 10;

/// IPv4 and TCP headers with the timestamp option: an MSS is the MTU less these.
pub const TCP_IPV4_OVERHEAD: u64 = 52;

impl SenderSetup {
    /// A TCP sender: `initcwnd` segments (the kernel's 10 without one) of the MSS at `mtu`;
    /// `probing` is `net.ipv4.tcp_mtu_probing` (0 off, 1 after a black hole, 2 always).
    pub fn tcp(initcwnd: Option<u32>, mtu: u32, probing: u8) -> Self {
        let packets = initcwnd.map_or(TCP_DEFAULT_INITIAL_SEGMENTS, u64::from);
        Self {
            initial_cwnd_bytes: packets * u64::from(mtu).saturating_sub(TCP_IPV4_OVERHEAD),
            initial_cwnd_packets: packets,
            initial_cwnd_from: if initcwnd.is_some() {
                SetBy::Flag
            } else {
                SetBy::StackDefault
            },
            mtu_discovery: probing > 0,
        }
    }

    /// A QUIC sender whose controller starts at `window_bytes`.
    pub fn quic(window_bytes: u64, from_flag: bool, mtu_discovery: bool) -> Self {
        Self {
            initial_cwnd_bytes: window_bytes,
            initial_cwnd_packets: window_bytes / 1200,
            initial_cwnd_from: if from_flag {
                SetBy::Flag
            } else {
                SetBy::StackDefault
            },
            mtu_discovery,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_starts_at_ten_segments_of_the_mss_unless_told() {
        let d = SenderSetup::tcp(None, 1500, 0);
        assert_eq!((d.initial_cwnd_bytes, d.initial_cwnd_packets), (14_480, 10));
        assert_eq!(d.initial_cwnd_from, SetBy::StackDefault);
        assert!(!d.mtu_discovery);
        let f = SenderSetup::tcp(Some(20), 9000, 1);
        assert_eq!(
            (f.initial_cwnd_bytes, f.initial_cwnd_from),
            (20 * 8948, SetBy::Flag)
        );
        assert!(f.mtu_discovery);
    }

    #[test]
    fn quic_counts_its_window_in_initial_packets() {
        let q = SenderSetup::quic(12_000, false, true);
        assert_eq!(q.initial_cwnd_packets, 10);
        assert!(q.mtu_discovery);
    }
}
