//! `qbench diff OLD NEW`: two saved run reports (a single benchmark's or merged shards') side
//! by side: the summary's figures with their change, and for every per-run figure both hold,
//! the same verdict `compare` gives (OLD is side A, NEW side B).

use serde::{Deserialize, Serialize};

use crate::report::compare::Comparison;
use crate::report::{Report, Summary};
use crate::stats::effect::Test;
use crate::stats::metric::Metric;
use crate::PercentileSummary;

pub const SCHEMA: &str = "qbench.diff-report";
/// 1: the first version.
pub const SCHEMA_VERSION: u32 = 1;

/// One figure of the two summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummaryDelta {
    /// `latency p99`, `goodput median`...
    pub name: String,
    /// `us`, `bit/s`, `objects/s`, `bytes` or `count`.
    pub unit: String,
    pub old: Option<f64>,
    pub new: Option<f64>,
    /// new - old, when both have the figure.
    pub delta: Option<f64>,
    /// (new - old) / old in percent, when both have it and old is not 0.
    pub delta_pct: Option<f64>,
    /// Whether a higher value is better (goodput, rate), lower (times), or neither (counts).
    pub better: Better,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    Neither,
}

/// The whole document `qbench diff --format json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffReport {
    pub schema: String,
    pub schema_version: u32,
    /// The two files as given.
    pub old: String,
    pub new: String,
    pub old_runs: usize,
    pub new_runs: usize,
    pub old_complete: bool,
    pub new_complete: bool,
    /// Fields of the measurement configuration that differ (`spec.proto: "h2" -> "h3"`):
    /// what the difference may be owed to.
    pub config_changes: Vec<String>,
    pub summary: Vec<SummaryDelta>,
    /// Per-run figures both reports hold, judged as `compare` judges its rounds (OLD is A,
    /// NEW is B: `b_faster` means NEW is better by the figure).
    pub verdicts: Vec<Comparison>,
}

fn delta(
    name: &str,
    unit: &str,
    better: Better,
    old: Option<f64>,
    new: Option<f64>,
) -> SummaryDelta {
    let d = old.zip(new).map(|(o, n)| n - o);
    SummaryDelta {
        name: name.into(),
        unit: unit.into(),
        old,
        new,
        delta: d,
        delta_pct: old
            .zip(d)
            .filter(|(o, _)| *o != 0.0)
            .map(|(o, d)| d / o * 100.0),
        better,
    }
}

/// The summaries' figures, family by family: the per-run medians, the merged object
/// latencies, the merged TTFBs, then the totals.
fn summary(old: &Report, new: &Report) -> Vec<SummaryDelta> {
    let (o, n) = (&old.summary, &new.summary);
    let mut rows = medians(o, n);
    rows.extend(percentiles(
        "latency",
        &PICKS,
        &o.object_latency.summary,
        &n.object_latency.summary,
    ));
    rows.extend(percentiles(
        "TTFB",
        &[PICKS[0], PICKS[2]],
        &o.ttfb.summary,
        &n.ttfb.summary,
    ));
    rows.extend(totals(o, n));
    rows
}

/// The medians over runs: page load, handshake, goodput, rate.
fn medians(o: &Summary, n: &Summary) -> Vec<SummaryDelta> {
    vec![
        delta(
            "PLT median",
            "us",
            Better::Lower,
            o.plt_us.median,
            n.plt_us.median,
        ),
        delta(
            "handshake median",
            "us",
            Better::Lower,
            o.handshake_us.median,
            n.handshake_us.median,
        ),
        delta(
            "goodput median",
            "bit/s",
            Better::Higher,
            o.goodput_bps.median,
            n.goodput_bps.median,
        ),
        delta(
            "objects/s median",
            "objects/s",
            Better::Higher,
            o.objects_per_s.median,
            n.objects_per_s.median,
        ),
    ]
}

/// A percentile of a merged histogram, by its name in a row.
type Pick = (&'static str, fn(&PercentileSummary) -> Option<u64>);

const PICKS: [Pick; 5] = [
    ("p50", |s| s.p50_us),
    ("p90", |s| s.p90_us),
    ("p99", |s| s.p99_us),
    ("p999", |s| s.p999_us),
    ("max", |s| s.max_us),
];

/// `picks` of two merged histograms, named `{family} {pick}`. A histogram that holds nothing
/// (a side that completed no object) has no figure, whatever a saved report says of its
/// percentiles.
fn percentiles(
    family: &str,
    picks: &[Pick],
    o: &PercentileSummary,
    n: &PercentileSummary,
) -> Vec<SummaryDelta> {
    let of = |s: &PercentileSummary, pick: fn(&PercentileSummary) -> Option<u64>| {
        pick(s).filter(|_| s.count > 0).map(|v| v as f64)
    };
    picks
        .iter()
        .map(|&(name, pick)| {
            let name = format!("{family} {name}");
            delta(&name, "us", Better::Lower, of(o, pick), of(n, pick))
        })
        .collect()
}

/// What the runs completed and carried, and their errors.
fn totals(o: &Summary, n: &Summary) -> [SummaryDelta; 3] {
    let count = |v: u64| Some(v as f64);
    [
        delta(
            "objects completed",
            "count",
            Better::Neither,
            count(o.objects_completed),
            count(n.objects_completed),
        ),
        delta(
            "payload bytes",
            "bytes",
            Better::Neither,
            count(o.payload_bytes),
            count(n.payload_bytes),
        ),
        delta(
            "errors",
            "count",
            Better::Lower,
            count(o.errors.total()),
            count(n.errors.total()),
        ),
    ]
}

/// Paths of the configuration's JSON form whose values differ, as `path: old -> new`.
fn config_changes(old: &Report, new: &Report) -> Vec<String> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value::Object;
        match (a, b) {
            (Object(ma), Object(mb)) => {
                let keys: std::collections::BTreeSet<&String> =
                    ma.keys().chain(mb.keys()).collect();
                for k in keys {
                    let null = serde_json::Value::Null;
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(
                        &p,
                        ma.get(k).unwrap_or(&null),
                        mb.get(k).unwrap_or(&null),
                        out,
                    );
                }
            }
            _ if a != b => out.push(format!("{path}: {a} -> {b}")),
            _ => {}
        }
    }
    let (Ok(a), Ok(b)) = (
        serde_json::to_value(&old.config),
        serde_json::to_value(&new.config),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk("", &a, &b, &mut out);
    out
}

impl DiffReport {
    pub fn of(old_name: &str, old: &Report, new_name: &str, new: &Report, test: Test) -> Self {
        let verdicts = Metric::ALL
            .iter()
            .filter(|m| {
                old.runs.iter().any(|r| m.of(r).is_some())
                    && new.runs.iter().any(|r| m.of(r).is_some())
            })
            .map(|&m| Comparison::of(&old.runs, &new.runs, m, test))
            .collect();
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            old: old_name.into(),
            new: new_name.into(),
            old_runs: old.runs.len(),
            new_runs: new.runs.len(),
            old_complete: old.complete,
            new_complete: new.complete,
            config_changes: config_changes(old, new),
            summary: summary(old, new),
            verdicts,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::RunReport;
    use crate::Protocol;

    /// A run of `n` objects of 1000 bytes each taking `lat` us, and `failed` objects reset.
    pub(crate) fn run(n: usize, lat: u64, failed: usize) -> RunReport {
        crate::report::merge::tests::run(&vec![lat; n], 0, failed)
    }

    pub(crate) fn report(proto: Protocol, runs: Vec<RunReport>) -> Report {
        let mut meta = crate::report::merge::tests::meta(None, 1);
        meta.config.spec.proto = proto;
        let n = runs.len();
        Report::new(meta, runs, n, None).unwrap()
    }

    #[test]
    fn a_slower_new_report_is_judged_worse_with_its_change_in_percent() {
        let old = report(Protocol::H2, (0..8).map(|i| run(10, 1000 + i, 0)).collect());
        let new = report(Protocol::H3, (0..8).map(|i| run(10, 2000 + i, 0)).collect());
        let d = DiffReport::of("old.json", &old, "new.json", &new, Test::MannWhitney);
        assert_eq!(d.config_changes, vec![r#"proto: "h2" -> "h3""#.to_string()]);
        let p50 = d.summary.iter().find(|r| r.name == "latency p50").unwrap();
        assert_eq!((p50.old, p50.better), (Some(1003.0), Better::Lower));
        let pct = p50.delta_pct.unwrap();
        assert!((99.0..101.0).contains(&pct), "{pct}");
        let plt = d.verdicts.iter().find(|c| c.metric == Metric::Plt).unwrap();
        assert_eq!(plt.verdict, crate::report::compare::Verdict::AFaster);
        // Every per-run figure both hold has a verdict; video figures none.
        let metrics: Vec<Metric> = d.verdicts.iter().map(|c| c.metric).collect();
        assert!(metrics.contains(&Metric::Goodput) && metrics.contains(&Metric::P99));
        assert!(!metrics.contains(&Metric::Rebuffer));
        let errors = d.summary.iter().find(|r| r.name == "errors").unwrap();
        assert_eq!((errors.delta, errors.delta_pct), (Some(0.0), None));
    }

    #[test]
    fn one_run_a_side_gives_changes_and_says_why_there_is_no_verdict() {
        let old = report(Protocol::H2, vec![run(10, 1000, 0)]);
        let new = report(Protocol::H2, vec![run(10, 1000, 2)]);
        let d = DiffReport::of("a", &old, "b", &new, Test::Welch);
        assert!(d.config_changes.is_empty(), "{:?}", d.config_changes);
        for c in &d.verdicts {
            assert_eq!(c.verdict, crate::report::compare::Verdict::Inconclusive);
            assert!(c.undecided.is_some());
        }
        let errors = d.summary.iter().find(|r| r.name == "errors").unwrap();
        assert_eq!((errors.old, errors.new), (Some(0.0), Some(2.0)));
        assert!(!d.new_complete && d.old_complete);
    }

    #[test]
    fn a_side_with_nothing_completed_has_no_latency_to_change() {
        let old = report(Protocol::H2, vec![run(10, 1000, 0)]);
        let new = report(Protocol::H2, vec![run(0, 1000, 3)]);
        let d = DiffReport::of("a", &old, "b", &new, Test::Welch);
        let p99 = d.summary.iter().find(|r| r.name == "latency p99").unwrap();
        assert_eq!((p99.new, p99.delta, p99.delta_pct), (None, None, None));
        assert!(d.verdicts.iter().all(|c| c.metric != Metric::P99));
    }
}
