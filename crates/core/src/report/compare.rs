//! Back-to-back comparison of two configurations (IMC'17 method): one figure per run of
//! each side (page load time by default, or a `Metric` of a held load), their percent
//! difference, the effect with its confidence interval and a test (Welch's t-test, as the
//! paper; Mann-Whitney U; or the bootstrap), judged at p < 0.01.

use serde::{Deserialize, Serialize};

use crate::report::clocks::{clocks_of, WhoseClock};
use crate::report::thresholds::ThresholdOutcome;
use crate::report::{Report, RunReport};
use crate::spec::threshold::{Metric as ThresholdMetric, Threshold};
use crate::stats::effect::{assess, Effect, Test};
use crate::stats::metric::Metric;
use crate::stats::rounds::{AutoRounds, Stopped};
use crate::stats::{welch, Stats, Welch};

pub const SCHEMA: &str = "qbench.compare-report";
/// 6: the rounds come after a `warmup` that is recorded and never judged; sides timed at
/// different places (a client's clock, the server's view) are not judged (`undecided`
/// `clocks_differ`).
/// 5: an inconclusive comparison says why (`undecided`).
/// 4: the comparison names its `test` and gives the `effect` with its interval, `statistic`
/// and `p`; `auto_rounds` with `--rounds auto` (version 3 files read as Welch's).
/// 3: the comparison names its `metric`; `plt_us_a`, `plt_us_b` and `plt_diff_pct` became
/// `a`, `b` and `diff_pct` (read under either name). 2: both sides' run reports are schema 2.
pub const SCHEMA_VERSION: u32 = 6;
/// The oldest version read whole: version 5 differs only in having no `warmup` (read as
/// none) and no `clocks_differ` reason.
pub const OLDEST_READ: u32 = 5;
/// Significance level of the verdict.
pub const ALPHA: f64 = 0.01;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A is better by the metric: lower for PLT and latencies, higher for goodput and rps.
    AFaster,
    BFaster,
    /// Not significant at `ALPHA` by the comparison's test, or too few complete rounds.
    Inconclusive,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comparison {
    /// Version 2 files compared page load times.
    #[serde(default)]
    pub metric: Metric,
    /// The metric over A's runs, in `metric.unit()`.
    #[serde(alias = "plt_us_a")]
    pub a: Stats,
    #[serde(alias = "plt_us_b")]
    pub b: Stats,
    /// How much better B is than A, in percent of A's mean: (A - B) / A x 100 where lower
    /// is better, (B - A) / A x 100 where higher is. Positive when B is better.
    #[serde(alias = "plt_diff_pct")]
    pub diff_pct: Option<f64>,
    /// The test behind `statistic`, `p` and `verdict`.
    #[serde(default)]
    pub test: Test,
    /// B against A with its 95% interval, as `test` measures it.
    #[serde(default)]
    pub effect: Option<Effect>,
    /// The test's statistic: t (welch), U of A (mann-whitney), the relative difference of
    /// medians (bootstrap).
    #[serde(default)]
    pub statistic: Option<f64>,
    #[serde(default)]
    pub p: Option<f64>,
    /// Welch's t-test whatever `test` is, as IMC'17 reported it.
    pub welch: Option<Welch>,
    pub verdict: Verdict,
    /// Why the verdict is inconclusive (version 5 on; `None` when it is not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecided: Option<Undecided>,
}

/// Why a comparison could not decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Undecided {
    /// A side has too few values for the test to give a p at all.
    NoTest { a: usize, b: usize },
    /// With this many values the test cannot give a p below `ALPHA` whatever they are.
    TooFewRounds {
        a: usize,
        b: usize,
        smallest_p: f64,
        /// Values a side needs (both alike), if any count up to 1,000 would do.
        needed: Option<usize>,
    },
    /// The test could have decided but the sides overlap: p at or above `ALPHA`.
    NotSignificant { p: f64 },
    /// The sides' times were taken at different places (a client's clock, the server's
    /// view): no figure of one is judged against the other's (version 6 on).
    ClocksDiffer {
        a: Vec<WhoseClock>,
        b: Vec<WhoseClock>,
        /// Whose clock each side's times are, in a line.
        why: String,
    },
}

impl Undecided {
    /// `TooFewRounds` when `test` cannot reach p < `ALPHA` with `a` and `b` values whatever
    /// they are; `None` when it can (or gives no p at all).
    pub fn beyond_reach(test: Test, a: usize, b: usize) -> Option<Self> {
        let least = test.smallest_p(a, b)?;
        (least >= ALPHA).then(|| Self::TooFewRounds {
            a,
            b,
            smallest_p: least,
            needed: test.rounds_needed(ALPHA, 1000),
        })
    }

    /// Why, in a few words for a table's cell.
    pub fn short(&self) -> String {
        match self {
            Self::NoTest { .. } => "too few rounds for a test".into(),
            Self::TooFewRounds {
                needed: Some(n), ..
            } => format!("too few rounds to reach p < {ALPHA} ({n} needed)"),
            Self::TooFewRounds { needed: None, .. } => {
                format!("this test cannot reach p < {ALPHA}")
            }
            Self::NotSignificant { p } => format!("sides overlap, p {}", crate::stats::fmt_p(*p)),
            Self::ClocksDiffer { .. } => "timed on different clocks".into(),
        }
    }

    /// Why, and what to do, in a sentence for a reader.
    pub fn explain(&self, test: Test) -> String {
        match self {
            Self::NoTest { a, b } => format!(
                "{} needs at least 2 values a side, and there were {a} and {b}",
                test.title()
            ),
            Self::TooFewRounds {
                a,
                b,
                smallest_p,
                needed,
            } => {
                let rounds = if a == b {
                    format!("{a} rounds a side")
                } else {
                    format!("{a} and {b} rounds")
                };
                let fix = match needed {
                    Some(n) => format!("run {n} rounds or more, or judge with --test welch"),
                    None => "judge with --test welch".to_string(),
                };
                format!(
                    "with {rounds}, {} cannot give p below {ALPHA} (its smallest is {}) \
                     however far apart the sides are: {fix}",
                    test.title(),
                    crate::stats::fmt_p(*smallest_p)
                )
            }
            Self::NotSignificant { p } => format!(
                "the sides overlap: p = {} is not below {ALPHA}; more rounds (--rounds auto) \
                 narrow the interval if there is a difference to find",
                crate::stats::fmt_p(*p)
            ),
            Self::ClocksDiffer { why, .. } => format!(
                "not judged: {why}; give both sides clients that time their own requests \
                 (or both the server's view)"
            ),
        }
    }
}

fn samples(runs: &[RunReport], metric: Metric) -> Vec<f64> {
    runs.iter().filter_map(|r| metric.of(r)).collect()
}

impl Comparison {
    /// The comparison of two sides' runs; sides timed at different places are shown and
    /// not judged.
    pub fn of(a: &[RunReport], b: &[RunReport], metric: Metric, test: Test) -> Self {
        let mut c = Self::of_samples(&samples(a, metric), &samples(b, metric), metric, test);
        if let Some(why) = crate::report::clocks::mismatch(a, b) {
            c.not_judged(Undecided::ClocksDiffer {
                a: clocks_of(a),
                b: clocks_of(b),
                why,
            });
        }
        c
    }

    /// Keeps both sides' figures and drops everything that weighs one against the other.
    fn not_judged(&mut self, why: Undecided) {
        self.diff_pct = None;
        self.effect = None;
        self.statistic = None;
        self.p = None;
        self.welch = None;
        self.verdict = Verdict::Inconclusive;
        self.undecided = Some(why);
    }

    pub fn of_samples(pa: &[f64], pb: &[f64], metric: Metric, test: Test) -> Self {
        let (sa, sb) = (Stats::of(pa), Stats::of(pb));
        let diff = match (sa.mean, sb.mean) {
            (Some(ma), Some(mb)) if ma > 0.0 => Some(if metric.higher_is_better() {
                (mb - ma) / ma * 100.0
            } else {
                (ma - mb) / ma * 100.0
            }),
            _ => None,
        };
        let w = welch(pa, pb);
        let o = assess(test, pa, pb, metric.higher_is_better());
        // The direction is the test's own effect's (a median shift may disagree in sign with
        // the means when a few rounds are far out).
        let direction = o.effect.as_ref().and_then(|e| e.rel_pct).or(diff);
        let verdict = match (o.p, direction) {
            (Some(p), Some(d)) if p < ALPHA && d > 0.0 => Verdict::BFaster,
            (Some(p), Some(d)) if p < ALPHA && d < 0.0 => Verdict::AFaster,
            _ => Verdict::Inconclusive,
        };
        let (na, nb) = (sa.n, sb.n);
        let undecided = (verdict == Verdict::Inconclusive).then(|| {
            Undecided::beyond_reach(test, na, nb).unwrap_or(match o.p {
                Some(p) => Undecided::NotSignificant { p },
                None => Undecided::NoTest { a: na, b: nb },
            })
        });
        Self {
            metric,
            a: sa,
            b: sb,
            diff_pct: diff,
            test,
            effect: o.effect,
            statistic: o.statistic,
            p: o.p,
            welch: w,
            verdict,
            undecided,
        }
    }
}

/// A round dropped because a side's run was noisy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiscardedRound {
    pub round: u32,
    /// The larger of the two runs' steal time, in percent.
    pub steal_pct: f64,
    /// What made the runs noisy (steal time, other work on the machine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<crate::stats::noise::NoiseCause>,
}

/// How `--rounds auto` went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AutoRoundsRecord {
    pub rule: AutoRounds,
    /// `None` while the rounds go on (a report written between rounds).
    pub stopped: Option<Stopped>,
}

/// The runs each side made before round 0, in the rounds' order rule, so that neither side's
/// first measured run is the one that pays for cold caches, a fresh allocator and an idle
/// server; kept for the record, never judged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Warmup {
    /// Which side went first in each warm-up run (`--warmup N` runs a side; 0: none).
    pub first: Vec<String>,
    pub a: Vec<RunReport>,
    pub b: Vec<RunReport>,
}

/// The JSON document `qbench compare --json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareReport {
    pub schema: String,
    pub schema_version: u32,
    /// Rounds run.
    pub rounds: u32,
    /// With `--rounds auto`: the rule and why the rounds stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rounds: Option<AutoRoundsRecord>,
    /// With `--discard-noisy`: rounds dropped for steal time above the threshold, and run
    /// again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discarded: Vec<DiscardedRound>,
    pub label_a: String,
    pub label_b: String,
    /// Which side went first in each round: A in even rounds, B in odd ones.
    pub first: Vec<String>,
    /// The warm-up before round 0 (version 6 on; empty with `--warmup 0`).
    #[serde(default)]
    pub warmup: Warmup,
    pub comparison: Comparison,
    pub complete: bool,
    /// Why the rounds ended before all were run (a stopping signal: "interrupted (SIGTERM)
    /// during round 3"); the rounds before it are compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
    pub a: Report,
    pub b: Report,
    /// With `--fail-if a-worse>P%|b-worse>P%`: each condition, what it saw, whether it failed
    /// (the command then exits with status 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdOutcome>,
}

impl CompareReport {
    pub fn new(
        rounds: u32,
        labels: (String, String),
        first: Vec<String>,
        (a, b): (Report, Report),
        (metric, test): (Metric, Test),
    ) -> Self {
        let comparison = Comparison::of(&a.runs, &b.runs, metric, test);
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            rounds,
            auto_rounds: None,
            discarded: Vec::new(),
            label_a: labels.0,
            label_b: labels.1,
            first,
            warmup: Warmup::default(),
            complete: a.complete && b.complete,
            aborted: None,
            comparison,
            a,
            b,
            thresholds: Vec::new(),
        }
    }
}

/// `compare`'s conditions: how much worse a side is, in percent of A by the comparison's
/// metric (the effect's estimate, else the difference of means), and whether the verdict says
/// it is significantly worse: only then can the condition hold.
pub fn judge_comparison(thresholds: &[Threshold], c: &Comparison) -> Vec<ThresholdOutcome> {
    // Both are positive when B is better.
    let better = c.effect.as_ref().and_then(|e| e.rel_pct).or(c.diff_pct);
    thresholds
        .iter()
        .map(|t| {
            let (worse, significant) = match t.metric {
                ThresholdMetric::BWorse => (better.map(|b| -b), c.verdict == Verdict::AFaster),
                _ => (better, c.verdict == Verdict::BFaster),
            };
            let failed = worse.is_none_or(|w| significant && t.op.holds(w, t.limit));
            crate::report::thresholds::outcome(t, worse, failed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_is_worse_only_when_the_verdict_says_so() {
        let t: Vec<Threshold> = ["b-worse>5%", "a-worse>0%", "b-worse>50%"]
            .iter()
            .map(|e| e.parse().unwrap())
            .collect();
        let a: Vec<f64> = (0..10).map(|i| 1000.0 + f64::from(i)).collect();
        let b: Vec<f64> = (0..10).map(|i| 1200.0 + f64::from(i)).collect();
        let c = Comparison::of_samples(&a, &b, Metric::Plt, Test::MannWhitney);
        assert_eq!(c.verdict, Verdict::AFaster);
        let o = judge_comparison(&t, &c);
        let worse = o[0].observed.unwrap();
        assert!((15.0..25.0).contains(&worse), "{worse}");
        assert!(o[0].failed && !o[1].failed && !o[2].failed, "{o:?}");
        assert_eq!(o[1].observed, Some(-worse));
        // Too few values for a verdict: however far apart, not significantly worse.
        let c = Comparison::of_samples(&a[..2], &b[..2], Metric::Plt, Test::MannWhitney);
        assert!(judge_comparison(&t, &c).iter().all(|o| !o.failed));
    }

    #[test]
    fn verdicts() {
        let a = [
            812.0, 790.5, 845.2, 801.1, 830.0, 795.7, 808.3, 822.9, 815.4, 799.8,
        ];
        let b = [
            760.2, 771.9, 748.3, 790.0, 755.5, 765.1, 780.7, 759.9, 770.3, 752.6,
        ];
        let c = Comparison::of_samples(&a, &b, Metric::Plt, Test::Welch);
        assert_eq!(c.verdict, Verdict::BFaster);
        let d = c.diff_pct.unwrap();
        // (812.09 - 765.45) / 812.09 x 100
        assert!((d - 5.743_205_802_312_536).abs() < 1e-9, "{d}");
        assert_eq!(
            Comparison::of_samples(&b, &a, Metric::P99, Test::Welch).verdict,
            Verdict::AFaster
        );
        // Where higher is better, the same samples judge the other way, and the difference
        // is still positive when B is better.
        let g = Comparison::of_samples(&a, &b, Metric::Goodput, Test::Welch);
        assert_eq!(g.verdict, Verdict::AFaster);
        assert!((g.diff_pct.unwrap() + d).abs() < 1e-9);
        let up = Comparison::of_samples(&b, &a, Metric::Rps, Test::Welch);
        assert_eq!(up.verdict, Verdict::BFaster);
        assert!(up.diff_pct.unwrap() > 0.0);
        let same = Comparison::of_samples(
            &[1.0, 2.0, 3.0, 4.0],
            &[1.5, 2.5, 2.0, 3.5, 4.0, 1.0],
            Metric::Plt,
            Test::Welch,
        );
        assert_eq!(same.verdict, Verdict::Inconclusive);
        assert_eq!(
            Comparison::of_samples(&[1.0], &[2.0], Metric::Plt, Test::MannWhitney).verdict,
            Verdict::Inconclusive
        );
    }

    /// A version 3 comparison reads as judged by Welch's t-test, with no effect interval.
    #[test]
    fn version_3_comparisons_read_as_welch() {
        let v3 = r#"{"metric":"p99","a":{"n":0,"mean":null,"median":null,"sd":null,"min":null,"max":null},
            "b":{"n":0,"mean":null,"median":null,"sd":null,"min":null,"max":null},
            "diff_pct":null,"welch":null,"verdict":"inconclusive"}"#;
        let c: Comparison = serde_json::from_str(v3).unwrap();
        assert_eq!((c.metric, c.test), (Metric::P99, Test::Welch));
        assert_eq!((c.effect, c.p), (None, None));
    }

    /// The verdict follows the chosen test: an outlying round sinks Welch's t-test, not
    /// Mann-Whitney's.
    #[test]
    fn the_verdict_is_the_chosen_tests() {
        let a = [10.0, 10.2, 9.9, 10.1, 10.0, 10.3, 9.8, 10.1, 60.0];
        let b = [9.0, 9.1, 8.9, 9.2, 9.0, 8.8, 9.1, 9.0, 9.1];
        let w = Comparison::of_samples(&a, &b, Metric::Plt, Test::Welch);
        let m = Comparison::of_samples(&a, &b, Metric::Plt, Test::MannWhitney);
        assert_eq!(w.verdict, Verdict::Inconclusive);
        assert_eq!(m.verdict, Verdict::BFaster);
        assert!(m.statistic.is_some() && m.p.is_some());
        assert!(m.effect.unwrap().rel_pct.unwrap() > 0.0);
    }

    /// An inconclusive verdict says why: 4 rounds a side that do not overlap at all are
    /// beyond Mann-Whitney's reach (Welch's finds them), 5 are not; overlapping sides are
    /// not significant; one round a side gives no test. A decided verdict has no reason.
    #[test]
    fn an_inconclusive_verdict_says_why() {
        let (a, b) = ([10.0, 10.1, 10.2, 10.3, 10.4], [9.0, 9.1, 9.2, 9.3, 9.4]);
        let four = Comparison::of_samples(&a[..4], &b[..4], Metric::Plt, Test::MannWhitney);
        assert_eq!(four.verdict, Verdict::Inconclusive);
        let Some(Undecided::TooFewRounds {
            a: 4,
            b: 4,
            smallest_p,
            needed: Some(5),
        }) = four.undecided
        else {
            panic!("{:?}", four.undecided)
        };
        assert!((smallest_p - 2.0 / 70.0).abs() < 1e-12);
        assert_eq!(
            four.undecided.as_ref().unwrap().short(),
            "too few rounds to reach p < 0.01 (5 needed)"
        );
        let text = four.undecided.as_ref().unwrap().explain(four.test);
        assert!(
            text.contains("4 rounds a side") && text.contains("0.029") && text.contains("5 rounds"),
            "{text}"
        );
        let welch = Comparison::of_samples(&a[..4], &b[..4], Metric::Plt, Test::Welch);
        assert_eq!((welch.verdict, welch.undecided), (Verdict::BFaster, None));
        let five = Comparison::of_samples(&a, &b, Metric::Plt, Test::MannWhitney);
        assert_eq!((five.verdict, &five.undecided), (Verdict::BFaster, &None));
        let mixed = Comparison::of_samples(
            &a,
            &[10.05, 10.15, 10.25, 10.35, 9.95],
            Metric::Plt,
            Test::MannWhitney,
        );
        assert!(
            matches!(mixed.undecided, Some(Undecided::NotSignificant { p }) if p >= ALPHA),
            "{:?}",
            mixed.undecided
        );
        let one = Comparison::of_samples(&[1.0], &[2.0], Metric::Plt, Test::Welch);
        assert_eq!(one.undecided, Some(Undecided::NoTest { a: 1, b: 1 }));
        // Written only when there is a reason, and read back.
        let json = serde_json::to_string(&four).unwrap();
        assert!(
            json.contains(r#""undecided":{"reason":"too_few_rounds""#),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<Comparison>(&json).unwrap().undecided,
            four.undecided
        );
        assert!(!serde_json::to_string(&five).unwrap().contains("undecided"));
    }

    /// A version 2 comparison (page load times under their old names) reads as PLT.
    #[test]
    fn version_2_comparisons_read_as_plt() {
        let v2 = r#"{"plt_us_a":{"n":2,"mean":10.0,"median":10.0,"sd":1.0,"min":9.0,"max":11.0},
            "plt_us_b":{"n":2,"mean":8.0,"median":8.0,"sd":1.0,"min":7.0,"max":9.0},
            "plt_diff_pct":20.0,"welch":null,"verdict":"inconclusive"}"#;
        let c: Comparison = serde_json::from_str(v2).unwrap();
        assert_eq!(c.metric, Metric::Plt);
        assert_eq!((c.a.n, c.b.mean, c.diff_pct), (2, Some(8.0), Some(20.0)));
    }
}
