//! What a run has done so far, for a scraper to read while it lasts: the current run's
//! counts, added up from its intervals. Memory is fixed: three histograms and one counter per
//! error kind, whatever the number of requests or intervals.

use crate::errors::ErrorCounts;
use crate::histogram::{HistogramError, LatencyHistogram};
use crate::report::load::IntervalRecord;

/// The current run's totals, reset when the next run starts.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub run: u32,
    /// Runs that have ended (the current one excluded).
    pub runs_done: u32,
    pub completed: u64,
    pub failed: u64,
    pub dropped: u64,
    pub payload_bytes: u64,
    /// Requests on the wire or due when the last interval ended.
    pub in_flight: u64,
    pub errors: ErrorCounts,
    pub latency: LatencyHistogram,
    pub ttfb: LatencyHistogram,
    /// Open loop: how late requests were sent; empty in a closed loop.
    pub start_lag: LatencyHistogram,
    /// Intervals added so far, over all runs.
    pub intervals: u64,
    /// The busiest client thread's share of the last interval on a CPU, and its name: near 1,
    /// the client rather than the server or the link may set the pace.
    pub busiest: Option<(String, f64)>,
}

impl Live {
    /// Adds interval `r` of run `run`; a later run starts its counts afresh.
    pub fn add(&mut self, run: u32, r: &IntervalRecord) -> Result<(), HistogramError> {
        if run != self.run {
            *self = Self {
                run,
                runs_done: self.runs_done.saturating_add(run.saturating_sub(self.run)),
                intervals: self.intervals,
                busiest: self.busiest.take(),
                ..Self::default()
            };
        }
        self.completed = self.completed.saturating_add(r.completed);
        self.failed = self.failed.saturating_add(r.failed);
        self.dropped = self.dropped.saturating_add(r.dropped);
        self.payload_bytes = self.payload_bytes.saturating_add(r.payload_bytes);
        self.in_flight = r.in_flight;
        self.errors.merge(&r.errors);
        self.latency.merge(&r.latency.histogram()?)?;
        if let Some(t) = &r.ttfb {
            self.ttfb.merge(&t.histogram()?)?;
        }
        if let Some(l) = &r.start_lag {
            self.start_lag.merge(&l.histogram()?)?;
        }
        self.intervals += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HistogramExport;
    use std::time::Duration;

    fn interval(completed: u64, lat_us: u64, errors: u64) -> IntervalRecord {
        let mut h = LatencyHistogram::new();
        for _ in 0..completed {
            h.record(Duration::from_micros(lat_us));
        }
        let mut e = ErrorCounts::default();
        for _ in 0..errors {
            e.add(crate::ErrorKind::Timeout);
        }
        IntervalRecord {
            start_us: 0,
            end_us: 1_000_000,
            warmup: false,
            completed,
            failed: errors,
            dropped: 0,
            payload_bytes: completed * 1000,
            in_flight: 7,
            errors: e,
            latency: HistogramExport::from(&h),
            ttfb: Some(HistogramExport::from(&h)),
            start_lag: None,
        }
    }

    #[test]
    fn intervals_add_up_and_a_new_run_starts_afresh() {
        let mut l = Live::default();
        l.add(0, &interval(10, 1000, 0)).unwrap();
        l.add(0, &interval(5, 3000, 2)).unwrap();
        assert_eq!(
            (l.completed, l.failed, l.payload_bytes, l.in_flight),
            (15, 2, 15_000, 7)
        );
        assert_eq!(l.latency.len(), 15);
        assert_eq!(l.ttfb.len(), 15);
        assert!(l.start_lag.is_empty());
        assert_eq!(l.latency.count_at_or_below(1000), 10);
        assert_eq!(l.errors.total(), 2);
        l.add(1, &interval(1, 500, 0)).unwrap();
        assert_eq!(
            (l.run, l.runs_done, l.completed, l.errors.total()),
            (1, 1, 1, 0)
        );
        assert_eq!(l.intervals, 3);
    }
}
