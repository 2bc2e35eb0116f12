//! `--rounds auto`'s settings, which a compare spec holds: the fewest and most rounds and the
//! precision to reach. The rule that applies them is `stats::rounds`.

use serde::{Deserialize, Serialize};

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
