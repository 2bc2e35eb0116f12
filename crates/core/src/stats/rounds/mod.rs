//! `--rounds auto`: run rounds until the difference is known to a chosen precision.
//!
//! The rule (after Hoefler & Belli, SC'15, who stop when the median's nonparametric interval
//! is within a percentage): after each pair of rounds from `min` on, stop when the 95%
//! interval of the relative difference is at most `precision` percentage points either side
//! of its estimate; stop at `max` rounds regardless and say so. The rule looks at the
//! interval's width alone, which does not depend on where the difference lies, so stopping
//! early neither moves the estimate nor makes a difference significant: the simulations in
//! the tests hold the interval's coverage and the test's false positive rate to their stated
//! levels under this rule.

use serde::{Deserialize, Serialize};

use crate::stats::effect::Effect;

/// Defaults of `--min-rounds`, `--max-rounds` and `--precision`.
pub const MIN_ROUNDS: u32 = 5;
pub const MAX_ROUNDS: u32 = 100;
pub const PRECISION_PCT: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AutoRounds {
    pub min: u32,
    pub max: u32,
    /// Half-width of the relative interval to reach, in percentage points.
    pub precision_pct: f64,
}

impl Default for AutoRounds {
    fn default() -> Self {
        Self {
            min: MIN_ROUNDS,
            max: MAX_ROUNDS,
            precision_pct: PRECISION_PCT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The interval reached the precision.
    Settled,
    /// `max` rounds ran and the interval is still wider.
    MaxRounds,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RoundsError {
    #[error("--min-rounds {0}: at least 2 (an interval needs two rounds per side)")]
    Min(u32),
    #[error("--max-rounds {max}: at least --min-rounds ({min})")]
    Max { min: u32, max: u32 },
    #[error("--precision {0}: a percentage above 0 and at most 100, e.g. 2%")]
    Precision(String),
}

impl AutoRounds {
    pub fn new(min: u32, max: u32, precision_pct: f64) -> Result<Self, RoundsError> {
        if min < 2 {
            return Err(RoundsError::Min(min));
        }
        if max < min {
            return Err(RoundsError::Max { min, max });
        }
        if !(precision_pct > 0.0 && precision_pct <= 100.0) {
            return Err(RoundsError::Precision(format!("{precision_pct}")));
        }
        Ok(Self {
            min,
            max,
            precision_pct,
        })
    }

    /// After `done` rounds whose effect is `effect`: `None` to run another.
    pub fn check(&self, done: u32, effect: Option<&Effect>) -> Option<Stopped> {
        let half = effect.and_then(Effect::half_width_pct);
        if done >= self.min && half.is_some_and(|h| h <= self.precision_pct) {
            return Some(Stopped::Settled);
        }
        (done >= self.max).then_some(Stopped::MaxRounds)
    }
}

/// `--precision 2%` or `2`: percentage points.
pub fn parse_precision(s: &str) -> Result<f64, RoundsError> {
    let t = s.trim();
    let num = t.strip_suffix('%').unwrap_or(t).trim();
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(RoundsError::Precision(s.to_string())),
    }
}

#[cfg(test)]
mod tests;
