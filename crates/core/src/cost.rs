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
/// per stack) instead of `socket_io`'s send and receive measured apart.
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
    let get = |id: &str| {
        est.get(id)
            .copied()
            .ok_or_else(|| CostError::Missing(id.into()))
    };
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
            let ns = *est
                .get(&bench)
                .ok_or_else(|| CostError::Missing(bench.clone()))?;
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
mod tests {
    use super::*;

    fn estimates(suite: &str, mtu: u16) -> Estimates {
        let mut e = Estimates::new();
        for f in ["produce", "ack", "consume"] {
            e.insert(format!("quic_packet/{f}/{suite}-{mtu}-gso"), 1000.0);
        }
        for id in [
            "socket_pipe/udp/gso",
            "socket_pipe/tcp/65536",
            "socket_io/tcp_write/65536",
            "socket_io/tcp_read/65536",
            "http_framing/h3_data/262144",
            "http_framing/h2_data/262144",
        ] {
            e.insert(id.into(), 1000.0);
        }
        for f in ["seal", "open"] {
            e.insert(format!("tls_record/{f}/{suite}-16384"), 1000.0);
        }
        e.insert("sys_cost/wakeup/tokio".into(), 5000.0);
        e.insert("sys_cost/page_fault/anon-4k".into(), 500.0);
        e.insert("socket_io/udp_send/sendmsg".into(), 3000.0);
        e.insert("socket_io/udp_recv/recvmmsg".into(), 1000.0);
        e.insert("socket_io/tcp_write/16384".into(), 1000.0);
        e.insert("socket_io/tcp_read/16384".into(), 1000.0);
        e
    }

    fn run(cpu_s: f64, payload_bytes: u64) -> MeasuredRun {
        MeasuredRun {
            cpu_s,
            payload_bytes,
            events: EventCounts::default(),
        }
    }

    #[test]
    fn components_scale_by_units_per_gigabyte() {
        let m = CostModel::new(&estimates("aes256gcm", 1452), "aes256gcm", 1452).unwrap();
        let packets = 1e9 / (1452 - QUIC_PACKET_OVERHEAD) as f64;
        // Four per-packet components at 1 us each, plus one frame per 256 KiB.
        let quic = 4.0 * packets * 1e-6 + 1e9 / 262144.0 * 1e-6;
        assert!((m.predicted_quic_cpu_s_per_gb - quic).abs() < 1e-9);
        let records = 1e9 / 16384.0;
        let ios = records * 16406.0 / 65536.0;
        let tcp = (2.0 * records + ios + 1e9 / 262144.0) * 1e-6;
        assert!((m.predicted_tcp_tls_cpu_s_per_gb - tcp).abs() < 1e-9);
        assert_eq!(m.rows.len(), 9);
    }

    #[test]
    fn missing_benchmarks_and_bad_parameters_are_named() {
        let mut e = estimates("chacha20", 1200);
        assert_eq!(
            CostModel::new(&e, "aes", 1200),
            Err(CostError::Suite("aes".into()))
        );
        assert_eq!(
            CostModel::new(&e, "chacha20", 1500),
            Err(CostError::Mtu(1500))
        );
        e.remove("socket_pipe/udp/gso");
        assert_eq!(
            CostModel::new(&e, "chacha20", 1200),
            Err(CostError::Missing("socket_pipe/udp/gso".into()))
        );
    }

    #[test]
    fn measured_is_the_median_per_gigabyte_and_ignores_empty_runs() {
        let m = CostModel::new(&estimates("aes128gcm", 1452), "aes128gcm", 1452).unwrap();
        let runs = [
            run(2.0, 1_000_000_000),
            run(3.0, 1_000_000_000),
            run(1.0, 500_000_000),
            run(9.0, 0),
        ];
        let got = Measured::new("r.json".into(), Stack::Quic, &runs, &m).unwrap();
        assert!(Measured::new("z.json".into(), Stack::Quic, &[run(1.0, 0)], &m).is_none());
        assert_eq!(got.runs, 3);
        assert_eq!(got.cpu_s_per_gb, 2.0);
        // No run counted events: the prediction is the benches' alone.
        assert!(got.events.is_empty());
        assert_eq!(
            got.predicted_with_events_cpu_s_per_gb,
            got.predicted_cpu_s_per_gb
        );
        assert!((got.ratio - 2.0 / m.predicted_quic_cpu_s_per_gb).abs() < 1e-12);
    }

    #[test]
    fn counted_events_add_their_benches_cost_per_gigabyte() {
        let m = CostModel::new(&estimates("aes256gcm", 1452), "aes256gcm", 1452).unwrap();
        let ack = m
            .events
            .iter()
            .find(|e| e.event == Event::AckDatagram)
            .unwrap();
        assert_eq!(ack.ns_per_event, 4000.0);
        // 64 KiB reads and writes at 1 us and 16 KiB ones too: no fixed cost per call.
        let tcp = m
            .events
            .iter()
            .find(|e| e.event == Event::TcpReadCall)
            .unwrap();
        assert_eq!(tcp.ns_per_event, 1000.0);
        let counted = |wakeups, ack_datagrams| EventCounts {
            wakeups: Some(wakeups),
            page_faults: Some(1000.0),
            ack_datagrams,
            ..EventCounts::default()
        };
        let runs = [
            MeasuredRun {
                cpu_s: 2.0,
                payload_bytes: 2_000_000_000,
                events: counted(200_000.0, Some(20_000.0)),
            },
            MeasuredRun {
                cpu_s: 1.0,
                payload_bytes: 1_000_000_000,
                events: counted(100_000.0, None),
            },
        ];
        let got = Measured::new("r.json".into(), Stack::TcpTls, &runs, &m).unwrap();
        // ACK datagrams are left out: one run did not count them.
        let rows: Vec<(Event, f64)> = got.events.iter().map(|e| (e.event, e.per_gb)).collect();
        assert_eq!(
            rows,
            [(Event::Wakeup, 100_000.0), (Event::PageFault, 750.0)]
        );
        // 100,000 wakeups at 5 us and 750 faults at 0.5 us per GB.
        let extra = 0.5 + 750.0 * 500.0 / 1e9;
        let want = m.predicted_tcp_tls_cpu_s_per_gb + extra;
        assert!((got.predicted_with_events_cpu_s_per_gb - want).abs() < 1e-12);
        assert!((got.ratio - 1.0 / want).abs() < 1e-12);
    }

    #[test]
    fn a_calls_fixed_cost_is_what_a_smaller_call_does_not_save() {
        let mut e = estimates("aes256gcm", 1452);
        // 2 us per 16 KiB read, 5 us per 64 KiB: 1 us fixed and 1 us per 16 KiB.
        e.insert("socket_io/tcp_read/16384".into(), 2000.0);
        e.insert("socket_io/tcp_read/65536".into(), 5000.0);
        let m = CostModel::new(&e, "aes256gcm", 1452).unwrap();
        let read = m
            .events
            .iter()
            .find(|e| e.event == Event::TcpReadCall)
            .unwrap();
        assert!((read.ns_per_event - 1000.0).abs() < 1e-9);
        assert_eq!(read.benches[0], "socket_io/tcp_read/16384");
        // 1 GB in 16 KiB reads: three calls more per 64 KiB than the model's.
        let beyond = EventCounts::calls_beyond_model(61_036, 1_000_000_000);
        assert!((beyond - (61_036.0 - 1e9 / 65536.0)).abs() < 1e-9);
        e.remove("socket_io/tcp_write/16384");
        assert_eq!(
            CostModel::new(&e, "aes256gcm", 1452),
            Err(CostError::Missing("socket_io/tcp_write/16384".into()))
        );
    }
}
