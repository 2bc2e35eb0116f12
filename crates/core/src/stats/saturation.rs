//! Was the client the bottleneck? Its threads' CPU use and how late its runtime ran a timer
//! say so; a run where they crossed these bounds carries a warning with the figures, so no
//! one takes a client limit for a server result.

use serde::{Deserialize, Serialize};

use crate::histogram::HistogramExport;

/// A client thread on a CPU for more than this share of the run was saturated.
pub const BUSY_LIMIT: f64 = 0.9;
/// A runtime whose 10 ms probe timer fired this late (p99), or an open loop whose requests
/// started this late (p99), could not keep up.
pub const LAG_LIMIT_US: u64 = 10_000;

/// One client thread over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadLoad {
    pub name: String,
    /// Share of the run it was on a CPU.
    pub busy: f64,
    /// Share of the run it was runnable but waiting for a CPU (taken by other threads, the
    /// in-process server's, or the hypervisor).
    pub waiting: f64,
}

/// How loaded the client was during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientLoad {
    pub threads: Vec<ThreadLoad>,
    /// How late a 10 ms timer fired on the client's runtime, over the run.
    pub runtime_lag: HistogramExport,
    /// Why the client may have limited the result; `null` when nothing says so.
    pub saturated: Option<String>,
}

impl ClientLoad {
    /// The verdict from the threads, the runtime's lag and (open loop) the start lag p99.
    pub fn judge(
        threads: Vec<ThreadLoad>,
        runtime_lag: HistogramExport,
        start_lag_p99_us: Option<u64>,
    ) -> Self {
        let mut why = Vec::new();
        for t in threads.iter().filter(|t| t.busy > BUSY_LIMIT) {
            why.push(format!("thread {} {:.0}% busy", t.name, t.busy * 100.0));
        }
        if let Some(p99) = runtime_lag.summary.p99_us.filter(|&v| v > LAG_LIMIT_US) {
            why.push(format!(
                "runtime timers {:.1} ms late (p99)",
                p99 as f64 / 1e3
            ));
        }
        if let Some(p99) = start_lag_p99_us.filter(|&v| v > LAG_LIMIT_US) {
            why.push(format!(
                "requests started {:.1} ms late (p99)",
                p99 as f64 / 1e3
            ));
        }
        Self {
            threads,
            runtime_lag,
            saturated: (!why.is_empty()).then(|| why.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::LatencyHistogram;
    use std::time::Duration;

    fn lag(ms: u64) -> HistogramExport {
        let mut h = LatencyHistogram::new();
        for _ in 0..100 {
            h.record(Duration::from_millis(ms));
        }
        HistogramExport::from(&h)
    }

    fn thread(name: &str, busy: f64) -> ThreadLoad {
        ThreadLoad {
            name: name.into(),
            busy,
            waiting: 0.0,
        }
    }

    #[test]
    fn a_busy_thread_or_a_late_runtime_or_late_starts_are_named() {
        let calm = ClientLoad::judge(vec![thread("qbench", 0.5)], lag(1), Some(200));
        assert_eq!(calm.saturated, None);
        let busy = ClientLoad::judge(vec![thread("qbench", 0.97)], lag(1), None);
        assert_eq!(busy.saturated.as_deref(), Some("thread qbench 97% busy"));
        let late = ClientLoad::judge(vec![thread("qbench", 0.5)], lag(25), Some(50_000));
        let why = late.saturated.unwrap();
        assert!(why.contains("runtime timers 25.0 ms late"), "{why}");
        assert!(why.contains("requests started 50.0 ms late"), "{why}");
    }
}
