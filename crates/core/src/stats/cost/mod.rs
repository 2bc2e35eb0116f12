//! The userspace cost model: per-component times from the criterion benches, scaled to the
//! work one gigabyte of payload takes on each stack, summed into a predicted CPU cost per GB
//! that a measured bulk transfer can be held against.

use std::collections::BTreeMap;

use serde::Serialize;

/// Bytes of a full-size QUIC packet that are not stream payload: short header with quinn's
/// 8-byte connection ID and up to 4 bytes of packet number, the 16-byte AEAD tag, and a STREAM
/// frame header with an 8-byte offset and 2-byte length.
pub const QUIC_PACKET_OVERHEAD: u64 = 1 + 8 + 4 + 16 + 1 + 1 + 8 + 2;
/// TLS 1.3 record: 5-byte header, 1-byte inner content type, 16-byte AEAD tag.
pub const TLS_RECORD_OVERHEAD: u64 = 5 + 1 + 16;
pub const TLS_RECORD: u64 = 16384;
/// Payload per DATA frame in qbench's transfers: the server's body chunk for h3, and the
/// client's advertised SETTINGS_MAX_FRAME_SIZE for h2.
pub const DATA_FRAME: u64 = 256 * 1024;
/// Bytes per write/read in the socket benches' TCP rows.
pub const TCP_IO: u64 = 65536;
/// The datagram size the socket benches send.
pub const UDP_DATAGRAM: u64 = 1452;
const GB: f64 = 1e9;

pub const SCHEMA: &str = "qbench.cost-report";
/// 2: the model has `events` (what a run's counters add) and each measured transfer the
/// events it counted, with the prediction that includes them.
/// 3: the socket rows are the `socket_pipe` benches (sender and receiver at once, one row
/// per stack) instead of `socket_io`'s send and receive measured apart, and QUIC has a row
/// for quinn's async layer (`quic_runtime` less the `quic_packet` rows).
pub const SCHEMA_VERSION: u32 = 3;

pub const SUITES: [&str; 3] = ["aes128gcm", "aes256gcm", "chacha20"];
pub const MTUS: [u16; 2] = [1200, 1452];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CostError {
    #[error("--suite {0}: expected one of aes128gcm, aes256gcm, chacha20")]
    Suite(String),
    #[error("--mtu {0}: expected 1200 or 1452 (the sizes the benches measure)")]
    Mtu(u16),
    #[error("no result for benchmark {0}: run `cargo bench -p qbench-benches` first")]
    Missing(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stack {
    Quic,
    TcpTls,
}

impl Stack {
    pub fn label(self) -> &'static str {
        match self {
            Self::Quic => "QUIC (h3)",
            Self::TcpTls => "TCP+TLS (h2)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Sender,
    Receiver,
    /// Both ends in one bench: framing (encoded and decoded), or a socket's sender and
    /// receiver running at once on two threads (`socket_pipe`), whose cost a bench that
    /// writes and then drains on one thread understates (about half, for TCP on loopback).
    Both,
}

/// One component's share of the cost of a gigabyte.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CostRow {
    pub stack: Stack,
    pub side: Side,
    pub component: &'static str,
    /// The benchmark id the time comes from.
    pub bench: String,
    /// What one iteration of that benchmark is.
    pub unit: String,
    pub ns_per_unit: f64,
    pub units_per_gb: f64,
    pub cpu_s_per_gb: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CostModel {
    pub suite: String,
    pub mtu: u16,
    pub rows: Vec<CostRow>,
    /// What the component benches predict, per stack.
    pub predicted_quic_cpu_s_per_gb: f64,
    pub predicted_tcp_tls_cpu_s_per_gb: f64,
    /// What one event of each kind a run counts costs, from benches of their own.
    pub events: Vec<EventCost>,
}

/// Work a transfer does that the component benches leave out, counted by the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A thread blocked and was woken again (a voluntary context switch), client or server.
    Wakeup,
    /// A minor page fault, client or server.
    PageFault,
    /// A datagram the QUIC client sent on its own (an ACK, in a download): one `sendmsg`
    /// there and its share of a `recvmmsg` at the server.
    AckDatagram,
    /// TCP reads (client and server) beyond one per 64 KiB read, as the model assumes: each
    /// one more system call's fixed cost (fewer, larger reads count negative).
    TcpReadCall,
    /// The same for TCP writes.
    TcpWriteCall,
}

impl Event {
    pub fn label(self) -> &'static str {
        match self {
            Self::Wakeup => "cross-thread wakeups",
            Self::PageFault => "minor page faults",
            Self::AckDatagram => "client datagrams (ACKs): send + receive syscalls",
            Self::TcpReadCall => "TCP reads beyond one per 64 KiB",
            Self::TcpWriteCall => "TCP writes beyond one per 64 KiB",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EventCost {
    pub event: Event,
    /// The benchmark ids whose medians add up to one event's cost.
    pub benches: Vec<String>,
    pub ns_per_event: f64,
}

/// How many of each event a run counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EventCounts {
    pub wakeups: Option<f64>,
    pub page_faults: Option<f64>,
    pub ack_datagrams: Option<f64>,
    pub tcp_read_calls: Option<f64>,
    pub tcp_write_calls: Option<f64>,
}

impl EventCounts {
    fn get(&self, e: Event) -> Option<f64> {
        match e {
            Event::Wakeup => self.wakeups,
            Event::PageFault => self.page_faults,
            Event::AckDatagram => self.ack_datagrams,
            Event::TcpReadCall => self.tcp_read_calls,
            Event::TcpWriteCall => self.tcp_write_calls,
        }
    }

    /// Socket calls beyond one per `TCP_IO` bytes.
    pub fn calls_beyond_model(calls: u64, bytes: u64) -> f64 {
        calls as f64 - bytes as f64 / TCP_IO as f64
    }
}

/// One kind of event in a measured transfer: how many per GB, and what they cost.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EventRow {
    pub event: Event,
    /// Median over runs.
    pub per_gb: f64,
    pub cpu_s_per_gb: f64,
}

/// The bench ids an event's cost comes from, and how: their sum, or (TCP calls) the fixed
/// cost of one call, from the same call at 16 KiB (a) and at 64 KiB (b): a = c + 16 KiB x
/// per byte and b = c + 64 KiB x per byte give c = (4a - b) / 3.
fn event_cost(e: Event, est: &Estimates) -> Result<(Vec<String>, f64), CostError> {
    let get = |id: &str| bench_ns(est, id);
    let fixed = |op: &str| {
        let (a, b) = (
            format!("socket_io/{op}/16384"),
            format!("socket_io/{op}/{TCP_IO}"),
        );
        let c = (4.0 * get(&a)? - get(&b)?) / 3.0;
        Ok((vec![a, b], c))
    };
    let sum = |ids: &[&str]| {
        let mut ns = 0.0;
        for id in ids {
            ns += get(id)?;
        }
        Ok((ids.iter().map(|s| s.to_string()).collect(), ns))
    };
    match e {
        Event::Wakeup => sum(&["sys_cost/wakeup/tokio"]),
        Event::PageFault => sum(&["sys_cost/page_fault/anon-4k"]),
        Event::AckDatagram => sum(&["socket_io/udp_send/sendmsg", "socket_io/udp_recv/recvmmsg"]),
        Event::TcpReadCall => fixed("tcp_read"),
        Event::TcpWriteCall => fixed("tcp_write"),
    }
}

const EVENTS: [Event; 5] = [
    Event::Wakeup,
    Event::PageFault,
    Event::AckDatagram,
    Event::TcpReadCall,
    Event::TcpWriteCall,
];

/// Benchmark id (`group/function/parameter`) -> median nanoseconds per iteration.
pub type Estimates = BTreeMap<String, f64>;

/// One benchmark's median, or the error naming the missing one.
fn bench_ns(est: &Estimates, id: &str) -> Result<f64, CostError> {
    est.get(id)
        .copied()
        .ok_or_else(|| CostError::Missing(id.into()))
}

impl CostModel {
    /// Builds the model for `suite` and QUIC packets of `mtu` bytes.
    pub fn new(est: &Estimates, suite: &str, mtu: u16) -> Result<Self, CostError> {
        if !SUITES.contains(&suite) {
            return Err(CostError::Suite(suite.to_string()));
        }
        if !MTUS.contains(&mtu) {
            return Err(CostError::Mtu(mtu));
        }
        let packets = GB / (u64::from(mtu) - QUIC_PACKET_OVERHEAD) as f64;
        let records = GB / TLS_RECORD as f64;
        let tcp_bytes = records * (TLS_RECORD + TLS_RECORD_OVERHEAD) as f64;
        let packet = format!("packet of {mtu} B");
        let datagram = format!("datagram of {UDP_DATAGRAM} B");
        let record = format!("record of {TLS_RECORD} B");
        let io = format!("{TCP_IO} B");
        let frame = format!("frame of {DATA_FRAME} B");
        let frames = GB / DATA_FRAME as f64;
        let ios = tcp_bytes / TCP_IO as f64;
        use Side::{Both, Receiver, Sender};
        use Stack::{Quic, TcpTls};
        #[rustfmt::skip]
        let specs = [
            (Quic, Sender, "build + seal packet", format!("quic_packet/produce/{suite}-{mtu}-gso"), &packet, packets),
            (Quic, Sender, "process ACKs", format!("quic_packet/ack/{suite}-{mtu}-gso"), &packet, packets),
            (Quic, Both, "UDP send (GSO) + receive (GRO), at once", "socket_pipe/udp/gso".into(), &datagram, packets),
            (Quic, Receiver, "open + reassemble + ACK", format!("quic_packet/consume/{suite}-{mtu}-gso"), &packet, packets),
            (Quic, Both, "h3 DATA framing", format!("http_framing/h3_data/{DATA_FRAME}"), &frame, frames),
            (TcpTls, Sender, "TLS seal", format!("tls_record/seal/{suite}-{TLS_RECORD}"), &record, records),
            (TcpTls, Both, "TCP write + read, at once", format!("socket_pipe/tcp/{TCP_IO}"), &io, ios),
            (TcpTls, Receiver, "TLS open", format!("tls_record/open/{suite}-{TLS_RECORD}"), &record, records),
            (TcpTls, Both, "h2 DATA frame (hyper)", format!("http_framing/h2_data/{DATA_FRAME}"), &frame, frames),
        ];
        let mut rows = Vec::with_capacity(specs.len());
        for (stack, side, component, bench, unit, units_per_gb) in specs {
            let ns = bench_ns(est, &bench)?;
            rows.push(CostRow {
                stack,
                side,
                component,
                bench,
                unit: unit.clone(),
                ns_per_unit: ns,
                units_per_gb,
                cpu_s_per_gb: ns * units_per_gb / 1e9,
            });
        }
        rows.push(async_layer_row(est, packets, &packet)?);
        let total = |stack| {
            rows.iter()
                .filter(|r| r.stack == stack)
                .map(|r| r.cpu_s_per_gb)
                .sum()
        };
        let mut events = Vec::with_capacity(EVENTS.len());
        for event in EVENTS {
            let (benches, ns_per_event) = event_cost(event, est)?;
            events.push(EventCost {
                event,
                benches,
                ns_per_event,
            });
        }
        Ok(Self {
            suite: suite.to_string(),
            mtu,
            predicted_quic_cpu_s_per_gb: total(Quic),
            predicted_tcp_tls_cpu_s_per_gb: total(TcpTls),
            rows,
            events,
        })
    }

    pub fn predicted(&self, stack: Stack) -> f64 {
        match stack {
            Stack::Quic => self.predicted_quic_cpu_s_per_gb,
            Stack::TcpTls => self.predicted_tcp_tls_cpu_s_per_gb,
        }
    }
}

/// What quinn adds above quinn-proto per packet (its endpoint and connection tasks, timers,
/// channels): a transfer through quinn over an in-memory link, less the link's own copies and
/// the three `quic_packet` rows at the same suite and packet size. Measured with qbench's own suite and 1452-byte
/// packets and charged per packet at any; never below zero.
fn async_layer_row(est: &Estimates, packets: f64, unit: &str) -> Result<CostRow, CostError> {
    let get = |id: &str| bench_ns(est, id);
    let whole = get(ASYNC_LAYER_BENCH)? - get(ASYNC_LINK_BENCH)?;
    let mut proto = 0.0;
    for f in ["produce", "ack", "consume"] {
        proto += get(&format!("quic_packet/{f}/{ASYNC_LAYER_AT}-gso"))?;
    }
    let ns = (whole - proto).max(0.0);
    Ok(CostRow {
        stack: Stack::Quic,
        side: Side::Both,
        component: "quinn's endpoint and connection tasks",
        bench: format!(
            "{ASYNC_LAYER_BENCH} - {ASYNC_LINK_BENCH} - quic_packet/{{produce,ack,consume}}/{ASYNC_LAYER_AT}-gso"
        ),
        unit: unit.to_string(),
        ns_per_unit: ns,
        units_per_gb: packets,
        cpu_s_per_gb: ns * packets / 1e9,
    })
}

/// The suite and packet size the async layer is measured at.
const ASYNC_LAYER_AT: &str = "aes256gcm-1452";
const ASYNC_LAYER_BENCH: &str = "quic_runtime/transfer/aes256gcm-1452";
/// The in-memory link's own share of that bench (the kernel's, in a transfer).
const ASYNC_LINK_BENCH: &str = "quic_runtime/link/1452";

/// The JSON document `qbench cost --json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CostReport {
    pub schema: String,
    pub schema_version: u32,
    pub model: CostModel,
    pub measured: Vec<Measured>,
}

impl CostReport {
    pub fn new(model: CostModel, measured: Vec<Measured>) -> Self {
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            model,
            measured,
        }
    }
}

/// A measured transfer's CPU per GB beside the model's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Measured {
    pub source: String,
    pub stack: Stack,
    pub runs: usize,
    /// Median over runs of (client + server CPU seconds) / payload GB.
    pub cpu_s_per_gb: f64,
    /// The component benches. prediction alone.
    pub predicted_cpu_s_per_gb: f64,
    /// The events the runs counted (every run counting it), at their benches' costs.
    pub events: Vec<EventRow>,
    /// The prediction with the events added.
    pub predicted_with_events_cpu_s_per_gb: f64,
    /// measured / predicted with events.
    pub ratio: f64,
}

/// One complete run of a measured transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeasuredRun {
    pub cpu_s: f64,
    pub payload_bytes: u64,
    pub events: EventCounts,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

impl Measured {
    /// `None` when no run moved a byte (CPU per GB would be a division by zero).
    pub fn new(
        source: String,
        stack: Stack,
        per_run: &[MeasuredRun],
        model: &CostModel,
    ) -> Option<Self> {
        let moved: Vec<&MeasuredRun> = per_run.iter().filter(|r| r.payload_bytes > 0).collect();
        let gb = |r: &MeasuredRun| r.payload_bytes as f64 / GB;
        let measured = median(moved.iter().map(|r| r.cpu_s / gb(r)).collect())?;
        let predicted = model.predicted(stack);
        let mut events = Vec::new();
        for cost in &model.events {
            let per_gb: Option<Vec<f64>> = moved
                .iter()
                .map(|r| Some(r.events.get(cost.event)? / gb(r)))
                .collect();
            if let Some(per_gb) = per_gb.and_then(median) {
                events.push(EventRow {
                    event: cost.event,
                    per_gb,
                    cpu_s_per_gb: per_gb * cost.ns_per_event / 1e9,
                });
            }
        }
        let with_events = predicted + events.iter().map(|e| e.cpu_s_per_gb).sum::<f64>();
        Some(Self {
            source,
            stack,
            runs: moved.len(),
            cpu_s_per_gb: measured,
            predicted_cpu_s_per_gb: predicted,
            events,
            predicted_with_events_cpu_s_per_gb: with_events,
            ratio: measured / with_events,
        })
    }
}

#[cfg(test)]
mod tests;
