//! Flows of several protocols at once through one bottleneck (IMC'17 Table 4): per-flow
//! goodput, throughput over time from the servers' byte counters, and Jain's fairness index.

use serde::{Deserialize, Serialize};

use crate::report::Report;
use crate::stats::jain;

pub const SCHEMA: &str = "qbench.compete-report";
/// 2: the flows' run reports are schema 2; `schema_version` is new.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Flow {
    pub label: String,
    pub goodput_bps: Option<f64>,
    /// (ms since the flow's connection started, bit/s over the preceding sample interval).
    pub throughput: Vec<(f64, f64)>,
    pub report: Report,
}

impl Flow {
    pub fn new(label: String, report: Report) -> Self {
        Self {
            label,
            goodput_bps: report.runs.first().and_then(|r| r.goodput_bps),
            throughput: throughput(&report),
            report,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompeteReport {
    pub schema: String,
    #[serde(default)]
    pub schema_version: u32,
    pub flows: Vec<Flow>,
    /// Over the flows' goodputs: 1 = perfectly fair, 1/n = one flow took everything.
    pub jain_index: Option<f64>,
    pub complete: bool,
}

impl CompeteReport {
    pub fn new(flows: Vec<Flow>) -> Self {
        let goodputs: Vec<f64> = flows.iter().map(|f| f.goodput_bps.unwrap_or(0.0)).collect();
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            jain_index: jain(&goodputs),
            complete: flows.iter().all(|f| f.report.complete),
            flows,
        }
    }
}

/// The first connection's sending rate between consecutive telemetry samples.
fn throughput(report: &Report) -> Vec<(f64, f64)> {
    let Some(samples) = report
        .runs
        .first()
        .and_then(|r| r.telemetry.as_ref())
        .and_then(|t| t.first())
        .map(|t| &t.samples)
    else {
        return Vec::new();
    };
    samples
        .windows(2)
        .filter(|w| w[1].t_us > w[0].t_us)
        .map(|w| {
            let bits = w[1].bytes_sent.saturating_sub(w[0].bytes_sent) as f64 * 8.0;
            let secs = (w[1].t_us - w[0].t_us) as f64 / 1e6;
            (w[1].t_us as f64 / 1000.0, bits / secs)
        })
        .collect()
}
