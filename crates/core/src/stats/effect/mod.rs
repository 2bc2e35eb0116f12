//! How big a difference between two configurations is, with its confidence interval, and how
//! sure a test is that there is one: Welch's t-test on means (the IMC'17 method), the
//! Mann-Whitney U test with the Hodges-Lehmann shift, or the bootstrap of medians.

use serde::{Deserialize, Serialize};

use crate::stats::bootstrap::{relative_median_diff, RESAMPLES};
use crate::stats::nonparam::{hodges_lehmann, mann_whitney};
use crate::stats::{welch, Stats};

/// Confidence level of every effect interval.
pub const LEVEL: f64 = 0.95;

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Test {
    /// Welch's t-test; the effect is the difference of means (IMC'17; what reports before
    /// version 4 used).
    #[default]
    Welch,
    /// Mann-Whitney U; the effect is the Hodges-Lehmann shift (median of all differences
    /// between a B round and an A round) with its distribution-free interval.
    MannWhitney,
    /// Percentile bootstrap of the relative difference of medians (10,000 resamples, seeded).
    Bootstrap,
}

/// The test `qbench compare` and scenarios judge by unless told otherwise. (`Test::default()`
/// is Welch's: what a report written before tests were named was judged by.)
pub const DEFAULT_TEST: Test = Test::MannWhitney;

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Self::Welch => "welch",
            Self::MannWhitney => "mann-whitney",
            Self::Bootstrap => "bootstrap",
        }
    }

    /// The name a reader knows it by.
    pub fn title(self) -> &'static str {
        match self {
            Self::Welch => "Welch's t-test",
            Self::MannWhitney => "Mann-Whitney U",
            Self::Bootstrap => "the bootstrap of medians",
        }
    }

    /// The smallest p this test can give with `n_a` and `n_b` values, whatever they are;
    /// `None` when it gives none at these counts. Mann-Whitney's exact p is a count of
    /// rank orders: with no overlap at all it is 2 / C(n_a + n_b, n_a), 0.029 with 4 a side.
    pub fn smallest_p(self, n_a: usize, n_b: usize) -> Option<f64> {
        match self {
            Self::Welch => (n_a >= 2 && n_b >= 2).then_some(0.0),
            Self::Bootstrap => (n_a >= 2 && n_b >= 2).then(|| 2.0 / (RESAMPLES as f64 + 1.0)),
            Self::MannWhitney => crate::stats::nonparam::mann_whitney_least_p(n_a, n_b),
        }
    }

    /// The fewest values a side (both alike) needs for this test to reach p < `alpha`, up to
    /// `limit`; `None` if not even then.
    pub fn rounds_needed(self, alpha: f64, limit: usize) -> Option<usize> {
        (2..=limit).find(|&n| self.smallest_p(n, n).is_some_and(|p| p < alpha))
    }
}

/// The effect of going from A to B: B - A in the metric's unit, and relative to A in percent,
/// signed so that positive means B is better (lower for times, higher for rates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Effect {
    /// B - A: difference of means (welch), Hodges-Lehmann shift (mann-whitney), difference of
    /// medians (bootstrap).
    pub diff: f64,
    pub diff_low: Option<f64>,
    pub diff_high: Option<f64>,
    /// The same relative to A's mean (welch) or median, in percent, positive when B is better.
    pub rel_pct: Option<f64>,
    pub rel_low_pct: Option<f64>,
    pub rel_high_pct: Option<f64>,
    /// Confidence level of the interval.
    pub level: f64,
}

impl Effect {
    /// Half the width of the relative interval, in percentage points: how precisely the
    /// difference is known. `None` while there is no interval.
    pub fn half_width_pct(&self) -> Option<f64> {
        Some((self.rel_high_pct? - self.rel_low_pct?) / 2.0)
    }
}

/// What the chosen test says.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub effect: Option<Effect>,
    /// t (welch), U of A (mann-whitney), the relative difference of medians (bootstrap).
    pub statistic: Option<f64>,
    pub p: Option<f64>,
}

/// Runs `test` on A's and B's per-round values; `higher_is_better` orients the relative
/// figures.
pub fn assess(test: Test, a: &[f64], b: &[f64], higher_is_better: bool) -> Outcome {
    let (sa, sb) = (Stats::of(a), Stats::of(b));
    let sign = if higher_is_better { 1.0 } else { -1.0 };
    // (diff, low, high) in the unit -> the effect, relative to `scale`.
    let effect = |d: f64, lo: Option<f64>, hi: Option<f64>, scale: Option<f64>| {
        let rel = |x: f64| scale.filter(|s| *s > 0.0).map(|s| sign * x / s * 100.0);
        let (rl, rh) = (lo.and_then(rel), hi.and_then(rel));
        // Orientation may flip the ends.
        let (rel_low_pct, rel_high_pct) = match (rl, rh) {
            (Some(x), Some(y)) => (Some(x.min(y)), Some(x.max(y))),
            _ => (None, None),
        };
        Effect {
            diff: d,
            diff_low: lo,
            diff_high: hi,
            rel_pct: rel(d),
            rel_low_pct,
            rel_high_pct,
            level: LEVEL,
        }
    };
    match test {
        Test::Welch => {
            let w = welch(a, b);
            let diff = sb.mean.zip(sa.mean).map(|(mb, ma)| mb - ma);
            let half = w.as_ref().and_then(|w| {
                use statrs::distribution::{ContinuousCDF, StudentsT};
                let t = StudentsT::new(0.0, 1.0, w.df).ok()?;
                // se = |diff / t|; t is never 0 with a non-zero diff.
                let se = (diff? / w.t).abs();
                se.is_finite()
                    .then(|| t.inverse_cdf(1.0 - (1.0 - LEVEL) / 2.0) * se)
            });
            Outcome {
                effect: diff.map(|d| effect(d, half.map(|h| d - h), half.map(|h| d + h), sa.mean)),
                statistic: w.as_ref().map(|w| w.t),
                p: w.map(|w| w.p),
            }
        }
        Test::MannWhitney => {
            let mw = mann_whitney(a, b);
            let shift = hodges_lehmann(a, b, LEVEL);
            Outcome {
                effect: shift.map(|s| effect(s.estimate, s.low, s.high, sa.median)),
                statistic: mw.as_ref().map(|m| m.u),
                p: mw.map(|m| m.p),
            }
        }
        Test::Bootstrap => {
            let boot = relative_median_diff(a, b, LEVEL, RESAMPLES);
            let (Some(ma), Some(mb)) = (sa.median, sb.median) else {
                return Outcome {
                    effect: None,
                    statistic: None,
                    p: None,
                };
            };
            let unit = |pct: f64| pct / 100.0 * ma;
            let e = match boot {
                Some(bt) => effect(
                    mb - ma,
                    Some(unit(bt.low_pct)),
                    Some(unit(bt.high_pct)),
                    Some(ma),
                ),
                None => effect(mb - ma, None, None, Some(ma)),
            };
            Outcome {
                effect: Some(e),
                statistic: boot.map(|b| b.estimate_pct),
                p: boot.map(|b| b.p),
            }
        }
    }
}

#[cfg(test)]
mod tests;
