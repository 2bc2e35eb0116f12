//! How the in-process server's sender starts each connection: the settings that decide how
//! many round trips a small object takes, recorded because the stacks' defaults differ
//! (quinn starts at 12,000 bytes and spends part of it on MTU probes; Linux TCP at 10
//! segments of the MSS), and, for TCP, how TLS records meet the edge of that first window.

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
    /// How the server cuts TLS records at a connection's start and after idle (h1/h2; QUIC
    /// packets are records of their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_records: Option<TlsRecordSetup>,
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

/// `--tls-records`: how the server sizes the TLS records of h1 and h2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum TlsRecords {
    /// In the first flight after the handshake and after idle, a response's head gets a
    /// segment of its own and a write whose records would cross the congestion window's edge
    /// is cut there; full records otherwise
    Dynamic,
    /// Full records from the start: a response's head shares a 16 KiB record with its body
    Full,
}

/// TLS records as a TCP sender of the in-process server cuts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TlsRecordSetup {
    pub sizing: TlsRecords,
    /// Whether records are cut at the window's edge on this path: false for `full`, and for
    /// an MSS that carries a full record in one segment (loopback), where none is.
    pub cut_at_window_edge: bool,
    /// Writes are measured against the window (TCP_INFO's congestion window less segments in
    /// flight and bytes queued) for the first flight after the handshake, and again after the
    /// server has sent nothing for the connection's retransmission timeout (when Linux
    /// restarts from the initial window), or this long whatever the timeout.
    pub idle_restart_max_ms: u64,
    /// Plaintext bytes of a full record (TLS's largest, rustls's default fragment).
    pub full_record_bytes: u64,
}

/// TLS 1.3 record overhead around the plaintext: header (5), inner content type (1), AEAD
/// tag (16).
pub const TLS_RECORD_OVERHEAD: u64 = 22;
/// The largest plaintext of a TLS record (RFC 8446 5.1), rustls's default fragment.
pub const TLS_FULL_RECORD: u64 = 16 * 1024;
/// Longest send gap after which writes are measured against the window again, whatever the
/// RTO.
pub const TLS_IDLE_RESTART_MAX_MS: u64 = 1000;

impl TlsRecordSetup {
    /// Records cut by `sizing` over a path of this MSS.
    pub fn new(sizing: TlsRecords, mss: u64) -> Self {
        Self {
            sizing,
            cut_at_window_edge: sizing == TlsRecords::Dynamic
                && mss > 0
                && mss < TLS_FULL_RECORD + TLS_RECORD_OVERHEAD,
            idle_restart_max_ms: TLS_IDLE_RESTART_MAX_MS,
            full_record_bytes: TLS_FULL_RECORD,
        }
    }
}

impl SenderSetup {
    /// A TCP sender: `initcwnd` segments (the kernel's 10 without one) of the MSS at `mtu`;
    /// `probing` is `net.ipv4.tcp_mtu_probing` (0 off, 1 after a black hole, 2 always);
    /// `records` the server's TLS record sizing.
    pub fn tcp(initcwnd: Option<u32>, mtu: u32, probing: u8, records: TlsRecords) -> Self {
        let packets = initcwnd.map_or(TCP_DEFAULT_INITIAL_SEGMENTS, u64::from);
        let mss = u64::from(mtu).saturating_sub(TCP_IPV4_OVERHEAD);
        Self {
            initial_cwnd_bytes: packets * mss,
            initial_cwnd_packets: packets,
            initial_cwnd_from: if initcwnd.is_some() {
                SetBy::Flag
            } else {
                SetBy::StackDefault
            },
            mtu_discovery: probing > 0,
            tls_records: Some(TlsRecordSetup::new(records, mss)),
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
            tls_records: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_starts_at_ten_segments_of_the_mss_unless_told() {
        let d = SenderSetup::tcp(None, 1500, 0, TlsRecords::Dynamic);
        assert_eq!((d.initial_cwnd_bytes, d.initial_cwnd_packets), (14_480, 10));
        assert_eq!(d.initial_cwnd_from, SetBy::StackDefault);
        assert!(!d.mtu_discovery);
        let f = SenderSetup::tcp(Some(20), 9000, 1, TlsRecords::Dynamic);
        assert_eq!(
            (f.initial_cwnd_bytes, f.initial_cwnd_from),
            (20 * 8948, SetBy::Flag)
        );
        assert!(f.mtu_discovery);
    }

    #[test]
    fn records_are_cut_at_the_windows_edge_unless_a_full_one_fits_a_segment() {
        let r = SenderSetup::tcp(None, 1500, 0, TlsRecords::Dynamic)
            .tls_records
            .unwrap();
        assert!(r.cut_at_window_edge);
        assert_eq!((r.full_record_bytes, r.idle_restart_max_ms), (16_384, 1000));
        let lo = SenderSetup::tcp(None, 65_536, 0, TlsRecords::Dynamic);
        assert!(!lo.tls_records.unwrap().cut_at_window_edge);
        let full = SenderSetup::tcp(None, 1500, 0, TlsRecords::Full);
        assert!(!full.tls_records.unwrap().cut_at_window_edge);
        assert!(SenderSetup::quic(12_000, false, true).tls_records.is_none());
    }

    #[test]
    fn quic_counts_its_window_in_initial_packets() {
        let q = SenderSetup::quic(12_000, false, true);
        assert_eq!(q.initial_cwnd_packets, 10);
        assert!(q.mtu_discovery);
    }
}
