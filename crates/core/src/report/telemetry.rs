//! Sender-side congestion-control telemetry: what the server samples per connection and the
//! client puts in the report as timelines.

use serde::{Deserialize, Serialize};

/// TCP_INFO `tcpi_ca_state` values (include/uapi/linux/tcp.h).
pub mod tcp_ca {
    pub const CWR: u8 = 2;
    pub const RECOVERY: u8 = 3;
    pub const LOSS: u8 = 4;
}

/// One sample of a sender's state. Counters are cumulative since the connection started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CcSample {
    /// Microseconds since the connection was accepted, on the server's monotonic clock.
    pub t_us: u64,
    /// Congestion window in bytes (after any cap).
    pub cwnd_bytes: u64,
    /// Bytes sent and not yet acknowledged or declared lost.
    pub in_flight_bytes: Option<u64>,
    /// Slow-start threshold in bytes; `None` before the first loss or where there is none (BBR).
    pub ssthresh_bytes: Option<u64>,
    pub srtt_us: u64,
    pub min_rtt_us: Option<u64>,
    /// Maximum segment (TCP) or datagram (QUIC) size used to convert packets to bytes.
    pub mss_bytes: u64,
    /// Packets the sender declared lost: QUIC's lost packets and lost MTU probes, TCP's
    /// retransmitted segments (`tcpi_total_retrans`).
    pub lost_packets: u64,
    pub retransmitted_packets: Option<u64>,
    /// Loss or ECN events that reduced the window (QUIC).
    pub congestion_events: Option<u64>,
    /// Persistent congestion (QUIC) or retransmission timeouts (TCP).
    pub timeouts: Option<u64>,
    pub bytes_sent: u64,
    pub pacing_bps: Option<u64>,
    pub delivery_bps: Option<u64>,
    /// The sender had no data ready (QUIC controller's view).
    pub app_limited: Option<bool>,
    /// TCP_INFO `tcpi_ca_state`.
    pub tcp_ca_state: Option<u8>,
}

/// All samples of one connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timeline {
    /// `quic` or `tcp`.
    pub transport: String,
    /// Congestion controller name as the stack reports it.
    pub cc: String,
    /// Congestion-window cap in bytes, when one was applied: QUIC's at the connection's path
    /// MTU when sampled last, TCP's at the MSS of its last sample.
    pub cwnd_cap_bytes: Option<u64>,
    /// The cap as asked (`--cwnd-cap`): QUIC packets of the path MTU, or TCP segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwnd_cap_packets: Option<u32>,
    pub interval_us: u64,
    pub samples: Vec<CcSample>,
    /// Samples were dropped because the connection outlived the sample budget.
    pub truncated: bool,
    /// What the server's QUIC stack did on this connection since the previous telemetry
    /// fetch, or since it opened (h3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::spec::quic_knobs::QuicStats>,
}

/// Samples kept per connection: 10 minutes at the default 10 ms interval.
pub const MAX_SAMPLES: usize = 60_000;

impl Timeline {
    /// Records the cap asked for; a TCP cap, applied by the kernel outside the sender (a
    /// locked route metric), in bytes too, at the MSS of the last sample.
    pub fn record_cap(&mut self, packets: u32) {
        self.cwnd_cap_packets = Some(packets);
        if self.transport == "tcp" {
            if let Some(s) = self.samples.last() {
                self.cwnd_cap_bytes = Some(u64::from(packets) * s.mss_bytes);
            }
        }
    }

    pub fn push(&mut self, s: CcSample) {
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(s);
        } else {
            self.truncated = true;
        }
    }
}
