//! `--fail-if` judged on a finished report: what each condition saw, and whether it failed.

use serde::{Deserialize, Serialize};

use crate::report::{Report, RunReport, Summary};
use crate::spec::threshold::{Figure, Metric, Threshold};
use crate::PercentileSummary;

/// One `--fail-if` condition and what the report held for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThresholdOutcome {
    /// As given on the command line.
    pub condition: String,
    /// The metric as `--fail-if` spells it (`p99`, `ttfb.p90`, `errors`, `rate`...).
    pub metric: String,
    pub op: String,
    /// The limit, in `unit`.
    pub limit: f64,
    /// `us`, `bit/s`, `objects/s`, `errors` or `%`.
    pub unit: String,
    /// What the report holds, in `unit`; null when it holds none (no object completed, no
    /// run timed), and then the condition fails: a condition that cannot be checked is not
    /// met.
    pub observed: Option<f64>,
    /// True when the condition holds (or could not be checked): the command then fails.
    pub failed: bool,
}

pub(crate) fn figure(s: &PercentileSummary, f: Figure) -> Option<f64> {
    let us = |v: Option<u64>| v.map(|v| v as f64);
    match f {
        Figure::P50 => us(s.p50_us),
        Figure::P90 => us(s.p90_us),
        Figure::P99 => us(s.p99_us),
        Figure::P999 => us(s.p999_us),
        Figure::Max => us(s.max_us),
        Figure::Mean => s.mean_us,
    }
    .filter(|_| s.count > 0)
}

/// What `metric` is in this summary and these runs, in the threshold's unit.
pub fn observed(metric: Metric, summary: &Summary, runs: &[RunReport]) -> Option<f64> {
    match metric {
        Metric::Latency(f) => figure(&summary.object_latency.summary, f),
        Metric::Ttfb(f) => figure(&summary.ttfb.summary, f),
        Metric::Errors => Some(summary.errors.total() as f64),
        Metric::ErrorShare => {
            let failed: u64 = runs.iter().map(|r| r.objects.failed).sum();
            let completed: u64 = runs.iter().map(|r| r.objects.completed).sum();
            let ended = failed.saturating_add(completed);
            (ended > 0).then(|| failed as f64 * 100.0 / ended as f64)
        }
        Metric::Rate => summary.objects_per_s.median,
        Metric::Goodput => summary.goodput_bps.median,
        Metric::Plt => summary.plt_us.median,
        Metric::Handshake => summary.handshake_us.median,
        // Comparisons are judged by `judge_comparison`.
        Metric::BWorse | Metric::AWorse => None,
    }
}

pub(crate) fn outcome(t: &Threshold, observed: Option<f64>, failed: bool) -> ThresholdOutcome {
    ThresholdOutcome {
        condition: t.text.clone(),
        metric: t.metric.name(),
        op: t.op.as_str().into(),
        limit: t.limit,
        unit: t.unit().into(),
        observed,
        failed,
    }
}

/// Each condition judged on the report's summary and runs.
pub fn judge(thresholds: &[Threshold], report: &Report) -> Vec<ThresholdOutcome> {
    thresholds
        .iter()
        .map(|t| {
            let seen = observed(t.metric, &report.summary, &report.runs);
            outcome(t, seen, seen.is_none_or(|v| t.op.holds(v, t.limit)))
        })
        .collect()
}

/// The failed conditions as one line: `p99>50ms (observed 61.2 ms), errors>0 (observed 3)`.
pub fn failed_line(outcomes: &[ThresholdOutcome]) -> Option<String> {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| o.failed)
        .map(|o| match o.observed {
            Some(v) => format!("{} (observed {})", o.condition, shown(v, &o.unit)),
            None => format!("{} (no value to check)", o.condition),
        })
        .collect();
    (!failed.is_empty()).then(|| failed.join(", "))
}

/// A value in a unit a reader takes in at once.
pub fn shown(v: f64, unit: &str) -> String {
    match unit {
        "us" if v >= 1e6 => format!("{:.3} s", v / 1e6),
        "us" if v >= 1e3 => format!("{:.3} ms", v / 1e3),
        "us" => format!("{v:.0} us"),
        "bit/s" => format!("{:.1} Mbit/s", v / 1e6),
        "%" => format!("{v:.3}%"),
        "objects/s" => format!("{v:.1}/s"),
        _ => format!("{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::diff::tests::{report, run};
    use crate::Protocol;

    fn judged(exprs: &[&str], r: &Report) -> Vec<ThresholdOutcome> {
        let t: Vec<Threshold> = exprs.iter().map(|e| e.parse().unwrap()).collect();
        judge(&t, r)
    }

    #[test]
    fn each_condition_sees_the_reports_own_figure() {
        let r = report(Protocol::H2, vec![run(10, 2000, 0), run(10, 4000, 0)]);
        let o = judged(
            &["p50>1ms", "max<=4ms", "ttfb.p50<1ms", "plt>1s", "errors>0"],
            &r,
        );
        let p50 = r.summary.object_latency.summary.p50_us.unwrap() as f64;
        assert_eq!(o[0].observed, Some(p50));
        assert!(o[0].failed);
        assert_eq!(
            o[1].observed,
            Some(r.summary.object_latency.summary.max_us.unwrap() as f64)
        );
        assert!(!o[2].failed && o[2].observed.unwrap() >= 1000.0);
        assert_eq!(o[3].observed, r.summary.plt_us.median);
        assert!(!o[3].failed);
        assert_eq!((o[4].observed, o[4].failed), (Some(0.0), false));
        let line = failed_line(&o).unwrap();
        assert!(line.starts_with("p50>1ms (observed "), "{line}");
        assert!(!line.contains("max<=4ms"), "{line}");
    }

    #[test]
    fn error_shares_count_failed_objects_and_nothing_ended_fails_the_check() {
        let r = report(Protocol::H2, vec![run(9, 1000, 1), run(10, 1000, 0)]);
        let o = judged(&["errors>5%", "errors>=1", "errors>0"], &r);
        assert_eq!((o[0].observed, o[0].failed), (Some(5.0), false));
        assert!(o[1].failed && o[2].failed);
        let none = report(Protocol::H2, vec![run(0, 1000, 0)]);
        let o = judged(&["errors>5%", "p99>1s", "rate<1"], &none);
        assert!(o.iter().all(|t| t.failed && t.observed.is_none()), "{o:?}");
        assert!(failed_line(&o)
            .unwrap()
            .contains("p99>1s (no value to check)"));
    }
}
