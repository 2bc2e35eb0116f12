//! Back-to-back comparison of two configurations (IMC'17 method): page load times of both,
//! their percent difference and Welch's t-test, judged at p < 0.01.

use serde::{Deserialize, Serialize};

use crate::report::{Report, RunReport};
use crate::stats::{welch, Stats, Welch};

pub const SCHEMA: &str = "qbench.compare-report";
/// 2: both sides' run reports are schema 2.
pub const SCHEMA_VERSION: u32 = 2;
/// Significance level of the verdict.
pub const ALPHA: f64 = 0.01;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    AFaster,
    BFaster,
    /// Not significant at `ALPHA`, or too few complete rounds to tell.
    Inconclusive,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub plt_us_a: Stats,
    pub plt_us_b: Stats,
    /// (mean A - mean B) / mean A x 100: positive when B loads faster.
    pub plt_diff_pct: Option<f64>,
    pub welch: Option<Welch>,
    pub verdict: Verdict,
}

fn plts(runs: &[RunReport]) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| r.plt_us.map(|p| p as f64))
        .collect()
}

impl Comparison {
    pub fn of(a: &[RunReport], b: &[RunReport]) -> Self {
        let (pa, pb) = (plts(a), plts(b));
        Self::of_samples(&pa, &pb)
    }

    pub fn of_samples(pa: &[f64], pb: &[f64]) -> Self {
        let (sa, sb) = (Stats::of(pa), Stats::of(pb));
        let diff = match (sa.mean, sb.mean) {
            (Some(ma), Some(mb)) if ma > 0.0 => Some((ma - mb) / ma * 100.0),
            _ => None,
        };
        let w = welch(pa, pb);
        let verdict = match (&w, diff) {
            (Some(w), Some(d)) if w.p < ALPHA && d > 0.0 => Verdict::BFaster,
            (Some(w), Some(d)) if w.p < ALPHA && d < 0.0 => Verdict::AFaster,
            _ => Verdict::Inconclusive,
        };
        Self {
            plt_us_a: sa,
            plt_us_b: sb,
            plt_diff_pct: diff,
            welch: w,
            verdict,
        }
    }
}

/// The JSON document `qbench compare --json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    pub schema: String,
    pub schema_version: u32,
    pub rounds: u32,
    pub label_a: String,
    pub label_b: String,
    /// Which side went first in each round (alternating).
    pub first: Vec<String>,
    pub comparison: Comparison,
    pub complete: bool,
    pub a: Report,
    pub b: Report,
}

impl CompareReport {
    pub fn new(
        rounds: u32,
        labels: (String, String),
        first: Vec<String>,
        a: Report,
        b: Report,
    ) -> Self {
        let comparison = Comparison::of(&a.runs, &b.runs);
        Self {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            rounds,
            label_a: labels.0,
            label_b: labels.1,
            first,
            complete: a.complete && b.complete,
            comparison,
            a,
            b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let a = [
            812.0, 790.5, 845.2, 801.1, 830.0, 795.7, 808.3, 822.9, 815.4, 799.8,
        ];
        let b = [
            760.2, 771.9, 748.3, 790.0, 755.5, 765.1, 780.7, 759.9, 770.3, 752.6,
        ];
        let c = Comparison::of_samples(&a, &b);
        assert_eq!(c.verdict, Verdict::BFaster);
        let d = c.plt_diff_pct.unwrap();
        // (812.09 - 765.45) / 812.09 x 100
        assert!((d - 5.743_205_802_312_536).abs() < 1e-9, "{d}");
        assert_eq!(Comparison::of_samples(&b, &a).verdict, Verdict::AFaster);
        let same = Comparison::of_samples(&[1.0, 2.0, 3.0, 4.0], &[1.5, 2.5, 2.0, 3.5, 4.0, 1.0]);
        assert_eq!(same.verdict, Verdict::Inconclusive);
        assert_eq!(
            Comparison::of_samples(&[1.0], &[2.0]).verdict,
            Verdict::Inconclusive
        );
    }
}
