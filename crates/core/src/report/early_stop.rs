//! `--fail-early`: `--fail-if` judged while the runs last, interval by interval, so that a CI
//! job whose load has already failed its conditions stops instead of running to the end.
//!
//! Only what the intervals hold can be judged early: errors (a count or a share of the
//! requests that ended), and object latency and TTFB figures over every measured interval so
//! far. Rates, goodput, PLT and handshake are medians over runs, judged on the final report
//! only. A percentile or a share is judged only once `MIN_ENDED` requests have ended, so that
//! the first few do not decide a long run alone; a count of errors above its limit, or a
//! maximum, can only grow and is judged at once.

use crate::errors::ErrorCounts;
use crate::histogram::{HistogramError, LatencyHistogram};
use crate::report::load::IntervalRecord;
use crate::report::thresholds::{figure, shown};
use crate::spec::threshold::{Figure, Metric, Op, Threshold};

/// Requests ended before a percentile, a mean or a share is judged early.
pub const MIN_ENDED: u64 = 100;

/// Every measured interval so far, over all runs.
#[derive(Debug, Default)]
pub struct EarlyStop {
    thresholds: Vec<Threshold>,
    completed: u64,
    failed: u64,
    errors: ErrorCounts,
    latency: LatencyHistogram,
    ttfb: LatencyHistogram,
}

/// Whether `t` can only hold more as the run goes on, so that holding once decides it.
fn only_grows(t: &Threshold) -> bool {
    let up = matches!(t.op, Op::Above | Op::AtLeast);
    up && matches!(
        t.metric,
        Metric::Errors | Metric::Latency(Figure::Max) | Metric::Ttfb(Figure::Max)
    )
}

impl EarlyStop {
    /// `None` when no condition can be judged early.
    pub fn new(thresholds: &[Threshold]) -> Option<Self> {
        let early: Vec<Threshold> = thresholds
            .iter()
            .filter(|t| {
                matches!(
                    t.metric,
                    Metric::Errors | Metric::ErrorShare | Metric::Latency(_) | Metric::Ttfb(_)
                )
            })
            .cloned()
            .collect();
        (!early.is_empty()).then(|| Self {
            thresholds: early,
            ..Self::default()
        })
    }

    /// Adds interval `r` (a warm-up's is left out, as the report leaves it out) and returns
    /// the conditions that now hold, as `--fail-if` names them: `p99>50ms (observed 61.2 ms
    /// after 1,000 requests)`.
    pub fn add(&mut self, r: &IntervalRecord) -> Result<Option<String>, HistogramError> {
        if r.warmup {
            return Ok(None);
        }
        self.completed = self.completed.saturating_add(r.completed);
        self.failed = self.failed.saturating_add(r.failed);
        self.errors.merge(&r.errors);
        self.latency.merge(&r.latency.histogram()?)?;
        if let Some(t) = &r.ttfb {
            self.ttfb.merge(&t.histogram()?)?;
        }
        let ended = self.completed.saturating_add(self.failed);
        let held: Vec<String> = self
            .thresholds
            .iter()
            .filter(|t| only_grows(t) || ended >= MIN_ENDED)
            .filter_map(|t| {
                let seen = self.observed(t.metric, ended)?;
                t.op.holds(seen, t.limit).then(|| {
                    format!(
                        "{} (observed {} after {ended} requests)",
                        t.text,
                        shown(seen, t.unit())
                    )
                })
            })
            .collect();
        Ok((!held.is_empty()).then(|| held.join(", ")))
    }

    fn observed(&self, metric: Metric, ended: u64) -> Option<f64> {
        match metric {
            Metric::Latency(f) => figure(&self.latency.summary(), f),
            Metric::Ttfb(f) => figure(&self.ttfb.summary(), f),
            Metric::Errors => Some(self.errors.total() as f64),
            Metric::ErrorShare => (ended > 0).then(|| self.failed as f64 * 100.0 / ended as f64),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, HistogramExport};
    use std::time::Duration;

    fn interval(n: u64, ms: u64, errors: u64, warmup: bool) -> IntervalRecord {
        let mut h = LatencyHistogram::new();
        for _ in 0..n {
            h.record(Duration::from_millis(ms));
        }
        let mut e = ErrorCounts::default();
        for _ in 0..errors {
            e.add(ErrorKind::Reset);
        }
        IntervalRecord {
            start_us: 0,
            end_us: 1_000_000,
            warmup,
            completed: n,
            failed: errors,
            dropped: 0,
            payload_bytes: 0,
            in_flight: 0,
            errors: e,
            latency: HistogramExport::from(&h),
            ttfb: Some(HistogramExport::from(&h)),
            start_lag: None,
        }
    }

    fn t(s: &str) -> Threshold {
        s.parse().unwrap()
    }

    #[test]
    fn only_what_intervals_hold_is_judged_early() {
        assert!(EarlyStop::new(&[t("rate<100"), t("goodput<1mbit"), t("plt>1s")]).is_none());
        assert!(EarlyStop::new(&[t("rate<100"), t("p99>1s")]).is_some());
    }

    #[test]
    fn errors_count_at_once_percentiles_after_enough_requests() {
        let mut e = EarlyStop::new(&[t("errors>2"), t("p99>50ms")]).unwrap();
        assert_eq!(e.add(&interval(10, 80, 2, false)).unwrap(), None);
        let held = e.add(&interval(10, 80, 1, false)).unwrap().unwrap();
        assert_eq!(held, "errors>2 (observed 3 after 23 requests)");
        let mut e = EarlyStop::new(&[t("p99>50ms")]).unwrap();
        // A warm-up's requests are not the run's.
        assert_eq!(e.add(&interval(500, 80, 0, true)).unwrap(), None);
        assert_eq!(e.add(&interval(50, 80, 0, false)).unwrap(), None);
        let held = e.add(&interval(50, 80, 0, false)).unwrap().unwrap();
        assert!(held.starts_with("p99>50ms (observed 80"), "{held}");
        assert!(held.ends_with("after 100 requests)"), "{held}");
    }

    #[test]
    fn a_condition_that_does_not_hold_never_stops() {
        let mut e = EarlyStop::new(&[t("p99>50ms"), t("errors>0.5%"), t("ttfb.max>1s")]).unwrap();
        for _ in 0..20 {
            assert_eq!(e.add(&interval(100, 10, 0, false)).unwrap(), None);
        }
        let held = e.add(&interval(100, 10, 30, false)).unwrap().unwrap();
        assert!(held.starts_with("errors>0.5% (observed 1.4"), "{held}");
    }
}
