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

/// An open loop in which more than this share of the requests started more than
/// `LATE_AFTER` (2 ms) late could not keep to its schedule, whatever its p99 says: at 2,000
/// requests/s, 12% started late while the p99 stayed under `LAG_LIMIT_US`.
pub const LATE_SHARE_LIMIT: f64 = 0.01;

/// Requests still due when a held load's window closes are dropped (`dropped_late`) however
/// idle the client is: up to this many a run are the window's end, not a client behind.
pub const END_OF_WINDOW_DROPS: u64 = 5;

/// Whether `dropped_late` requests of `due` (sent and dropped) over `runs` runs say the client
/// was past its capacity: more than a window's end accounts for, and more than
/// `LATE_SHARE_LIMIT` of what was due, so that the evidence grows with the load (a handful at
/// the end of a window at a tenth of capacity is no saturation).
pub fn past_capacity(dropped_late: u64, due: u64, runs: u64) -> bool {
    dropped_late > END_OF_WINDOW_DROPS.saturating_mul(runs.max(1))
        && dropped_late as f64 > LATE_SHARE_LIMIT * due as f64
}

/// An open loop's start lag over a run, as far as it is the client's: from each request's
/// intended start to when the client took it up, before any wait for a stream or its
/// connection (a server's stream limit is not the client's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartLag {
    pub p99_us: Option<u64>,
    /// Requests taken up more than `LATE_AFTER` late, of `sent`.
    pub late: u64,
    pub sent: u64,
}

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
    /// The verdict from the threads, the runtime's lag and (open loop) the start lag: its
    /// p99 and the share of requests started late.
    pub fn judge(
        threads: Vec<ThreadLoad>,
        runtime_lag: HistogramExport,
        start: Option<StartLag>,
    ) -> Self {
        let start_lag_p99_us = start.and_then(|s| s.p99_us);
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
                "requests taken up {:.1} ms late (p99)",
                p99 as f64 / 1e3
            ));
        }
        if let Some(s) = start.filter(|s| s.sent > 0) {
            let share = s.late as f64 / s.sent as f64;
            if share > LATE_SHARE_LIMIT {
                why.push(format!(
                    "{} of {} requests ({:.1}%) taken up more than {} ms late",
                    s.late,
                    s.sent,
                    share * 100.0,
                    crate::spec::load::LATE_AFTER.as_millis()
                ));
            }
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
        let start = |p99: u64, late: u64, sent: u64| {
            Some(StartLag {
                p99_us: Some(p99),
                late,
                sent,
            })
        };
        let calm = ClientLoad::judge(vec![thread("qbench", 0.5)], lag(1), start(200, 1, 1000));
        assert_eq!(calm.saturated, None);
        let busy = ClientLoad::judge(vec![thread("qbench", 0.97)], lag(1), None);
        assert_eq!(busy.saturated.as_deref(), Some("thread qbench 97% busy"));
        let late = ClientLoad::judge(vec![thread("qbench", 0.5)], lag(25), start(50_000, 0, 0));
        let why = late.saturated.unwrap();
        assert!(why.contains("runtime timers 25.0 ms late"), "{why}");
        assert!(why.contains("requests taken up 50.0 ms late"), "{why}");
    }

    /// A few drops at a window's end are no saturation, at any load; many are, in proportion
    /// to what was due.
    #[test]
    fn past_capacity_takes_drops_in_proportion_to_the_load() {
        // The reviewer's case: 13% of capacity, 1 to 5 drops at a window's end.
        for late in 1..=5 {
            assert!(!past_capacity(late, 13_000, 1), "{late}");
            assert!(!past_capacity(late, 400, 1), "{late} of 400");
        }
        // Ten runs may each drop a handful at their end.
        assert!(!past_capacity(50, 4_000, 10));
        // More than a window's end, but under 1% of a large load.
        assert!(!past_capacity(90, 10_000, 1));
        assert!(past_capacity(101, 10_000, 1));
        // A client far behind: most of what was due.
        assert!(past_capacity(9_000_000, 10_000_000, 1));
        assert!(past_capacity(6, 100, 1));
        assert!(!past_capacity(0, 0, 0));
    }

    /// A p99 under the limit does not hide 12% of requests started late; 1% does not warn.
    #[test]
    fn many_late_starts_are_named_whatever_the_p99() {
        let at = |late: u64| {
            let start = StartLag {
                p99_us: Some(9_800),
                late,
                sent: 20_000,
            };
            ClientLoad::judge(vec![thread("qbench", 0.5)], lag(1), Some(start)).saturated
        };
        assert_eq!(
            at(2_483).as_deref(),
            Some("2483 of 20000 requests (12.4%) taken up more than 2 ms late")
        );
        assert_eq!(at(200), None);
        assert_eq!(at(201).map(|w| w.contains("(1.0%)")), Some(true));
    }
}
