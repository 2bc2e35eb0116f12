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
pub const SCHEMA_VERSION: u32 = 1;

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
    /// Framing counted once for both ends (the bench encodes and decodes).
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
    pub predicted_quic_cpu_s_per_gb: f64,
    pub predicted_tcp_tls_cpu_s_per_gb: f64,
}

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
            (Quic, Sender, "UDP send (GSO)", "socket_io/udp_send/gso".into(), &datagram, packets),
            (Quic, Receiver, "UDP receive (GRO)", "socket_io/udp_recv/gro".into(), &datagram, packets),
            (Quic, Receiver, "open + reassemble + ACK", format!("quic_packet/consume/{suite}-{mtu}-gso"), &packet, packets),
            (Quic, Both, "h3 DATA framing", format!("http_framing/h3_data/{DATA_FRAME}"), &frame, frames),
            (TcpTls, Sender, "TLS seal", format!("tls_record/seal/{suite}-{TLS_RECORD}"), &record, records),
            (TcpTls, Sender, "TCP write", format!("socket_io/tcp_write/{TCP_IO}"), &io, ios),
            (TcpTls, Receiver, "TCP read", format!("socket_io/tcp_read/{TCP_IO}"), &io, ios),
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
        Ok(Self {
            suite: suite.to_string(),
            mtu,
            predicted_quic_cpu_s_per_gb: total(Quic),
            predicted_tcp_tls_cpu_s_per_gb: total(TcpTls),
            rows,
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
    pub predicted_cpu_s_per_gb: f64,
    /// measured / predicted.
    pub ratio: f64,
}

impl Measured {
    /// `per_run` holds (CPU seconds, payload bytes) of each complete run; `None` when no run
    /// moved a byte (CPU per GB would be a division by zero).
    pub fn new(
        source: String,
        stack: Stack,
        per_run: &[(f64, u64)],
        model: &CostModel,
    ) -> Option<Self> {
        let mut v: Vec<f64> = per_run
            .iter()
            .filter(|(_, b)| *b > 0)
            .map(|(cpu, b)| cpu / (*b as f64 / GB))
            .collect();
        v.sort_by(f64::total_cmp);
        let median = match v.len() {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        let predicted = model.predicted(stack);
        Some(Self {
            source,
            stack,
            runs: v.len(),
            cpu_s_per_gb: median,
            predicted_cpu_s_per_gb: predicted,
            ratio: median / predicted,
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
            "socket_io/udp_send/gso",
            "socket_io/udp_recv/gro",
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
        e
    }

    #[test]
    fn components_scale_by_units_per_gigabyte() {
        let m = CostModel::new(&estimates("aes256gcm", 1452), "aes256gcm", 1452).unwrap();
        let packets = 1e9 / (1452 - QUIC_PACKET_OVERHEAD) as f64;
        // Five per-packet components at 1 us each, plus one frame per 256 KiB.
        let quic = 5.0 * packets * 1e-6 + 1e9 / 262144.0 * 1e-6;
        assert!((m.predicted_quic_cpu_s_per_gb - quic).abs() < 1e-9);
        let records = 1e9 / 16384.0;
        let ios = 2.0 * records * 16406.0 / 65536.0;
        let tcp = (2.0 * records + ios + 1e9 / 262144.0) * 1e-6;
        assert!((m.predicted_tcp_tls_cpu_s_per_gb - tcp).abs() < 1e-9);
        assert_eq!(m.rows.len(), 11);
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
        e.remove("socket_io/udp_recv/gro");
        assert_eq!(
            CostModel::new(&e, "chacha20", 1200),
            Err(CostError::Missing("socket_io/udp_recv/gro".into()))
        );
    }

    #[test]
    fn measured_is_the_median_per_gigabyte_and_ignores_empty_runs() {
        let m = CostModel::new(&estimates("aes128gcm", 1452), "aes128gcm", 1452).unwrap();
        let runs = [
            (2.0, 1_000_000_000),
            (3.0, 1_000_000_000),
            (1.0, 500_000_000),
            (9.0, 0),
        ];
        let got = Measured::new("r.json".into(), Stack::Quic, &runs, &m).unwrap();
        assert!(Measured::new("z.json".into(), Stack::Quic, &[(1.0, 0)], &m).is_none());
        assert_eq!(got.runs, 3);
        assert_eq!(got.cpu_s_per_gb, 2.0);
        assert!((got.ratio - 2.0 / m.predicted_quic_cpu_s_per_gb).abs() < 1e-12);
    }
}
