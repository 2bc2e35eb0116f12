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

pub use crate::spec::rounds::{
    parse_precision, AutoRounds, RoundsError, MAX_ROUNDS, MIN_ROUNDS, PRECISION_PCT,
};
use crate::stats::effect::Effect;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The interval reached the precision.
    Settled,
    /// `max` rounds ran and the interval is still wider.
    MaxRounds,
}

// The rule is statistics and its settings are the spec's, which holds them without it.
impl AutoRounds {
    /// After `done` rounds whose effect is `effect`: `None` to run another.
    pub fn check(&self, done: u32, effect: Option<&Effect>) -> Option<Stopped> {
        let half = effect.and_then(Effect::half_width_pct);
        if done >= self.min && half.is_some_and(|h| h <= self.precision_pct) {
            return Some(Stopped::Settled);
        }
        (done >= self.max).then_some(Stopped::MaxRounds)
    }
}

#[cfg(test)]
mod tests;
