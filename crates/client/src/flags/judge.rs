//! How a comparison decides: how many rounds (`--rounds N|auto`), by which figure
//! (`--metric`) and by which test (`--test`).

use clap::Args;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::stats::rounds::{
    parse_precision, AutoRounds, MAX_ROUNDS, MIN_ROUNDS, PRECISION_PCT,
};

use qbench_engine::error::ConfigError;

/// The test `qbench compare` uses unless told: robust to the heavy tails and bimodal rounds of
/// network timings, exact for small samples, and with no random resampling (the book,
/// "Comparing two configurations", "Which test").
pub use qbench_core::stats::effect::DEFAULT_TEST;

#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// Rounds, each running A and B once with fresh connections, alternating which goes
    /// first: a number (at least 2), or `auto`: until the 95% interval of the relative
    /// difference is within --precision
    #[arg(long, default_value = "10", value_name = "N|auto", value_parser = parse_rounds)]
    pub rounds: RoundsArg,

    /// With --rounds auto: rounds before the interval may stop them [default: 5]
    #[arg(long, value_name = "N")]
    pub min_rounds: Option<u32>,

    /// With --rounds auto: rounds at most, the verdict saying the precision was not reached
    /// [default: 100]
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<u32>,

    /// With --rounds auto: how far either side of its estimate the 95% interval of the
    /// relative difference may reach, in percentage points (`2%`) [default: 2%]
    #[arg(long, value_name = "PCT", value_parser = parse_precision_arg)]
    pub precision: Option<f64>,

    /// What the rounds compare: plt, goodput, rps, or the object latency's p50, p99 or p999
    /// (from the intended start at a --rate) [default: plt; with --duration, p99 at a --rate
    /// and goodput without]
    #[arg(long, value_enum)]
    pub metric: Option<Metric>,

    /// The test and its effect interval: mann-whitney (Hodges-Lehmann shift), welch
    /// (difference of means, as IMC'17) or bootstrap (of medians)
    #[arg(long, value_enum, default_value_t = DEFAULT_TEST)]
    pub test: Test,

    /// A run during which other guests took more than this share of the machine's CPU
    /// (steal time, /proc/stat) is flagged as noisy [default: 10%]
    #[arg(long, value_name = "PCT", value_parser = parse_precision_arg)]
    pub steal_threshold: Option<f64>,

    /// Drop a round in which either side's run was noisy and run it again (at most as many
    /// times as there are rounds; the report lists the dropped rounds)
    #[arg(long)]
    pub discard_noisy: bool,

    /// Measure the link again before every round after the first (needs --link), as before
    /// the first run: each measurement goes in the report's `link.recalibrations`, a field
    /// beyond its tolerance prints a warning naming the round, and with --strict-link ends
    /// the rounds
    #[arg(long)]
    pub recalibrate: bool,

    /// Rounds run before round 0 and never judged, in the rounds' order (A first in even
    /// ones), kept in the report's `warmup`: neither side's first measured run pays for a
    /// cold start (0 to 10)
    #[arg(long, default_value_t = DEFAULT_WARMUP_ROUNDS, value_name = "N",
          value_parser = parse_warmup_rounds)]
    pub warmup_rounds: u32,
}

/// Default of `--warmup-rounds`: one run a side takes the cold start (the first connection's
/// key schedule, the allocator's and the server's first buffers) out of round 0.
pub use qbench_engine::DEFAULT_WARMUP_ROUNDS;
/// At most this many warm-up rounds: more only lengthens the comparison.
pub const MAX_WARMUP_ROUNDS: u32 = 10;

fn parse_warmup_rounds(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n <= MAX_WARMUP_ROUNDS => Ok(n),
        _ => Err(format!(
            "`{s}`: a number of rounds from 0 to {MAX_WARMUP_ROUNDS}"
        )),
    }
}

/// Default of `--fdr`.
pub const DEFAULT_FDR: f64 = 0.05;

/// Multiple-comparison control over a sweep's cells.
#[derive(Debug, Args)]
pub struct FdrArgs {
    /// Control the false discovery rate across the comparison cells at this level
    /// (Benjamini-Hochberg): a cell survives when its verdict is significant and its adjusted
    /// p (q) is at most this [default: 0.05]
    #[arg(long, value_name = "Q", value_parser = parse_fdr, conflicts_with = "no_fdr")]
    pub fdr: Option<f64>,

    /// Judge every cell on its own at p < 0.01, as IMC'17 did (no q column)
    #[arg(long)]
    pub no_fdr: bool,
}

impl FdrArgs {
    /// The level, or `None` with `--no-fdr`.
    pub fn level(&self) -> Option<f64> {
        (!self.no_fdr).then(|| self.fdr.unwrap_or(DEFAULT_FDR))
    }
}

fn parse_fdr(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(q) if q > 0.0 && q < 1.0 => Ok(q),
        _ => Err(format!("`{s}`: a rate above 0 and below 1, e.g. 0.05")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundsArg {
    Fixed(u32),
    Auto,
}

fn parse_rounds(s: &str) -> Result<RoundsArg, String> {
    if s.trim() == "auto" {
        return Ok(RoundsArg::Auto);
    }
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 2 => Ok(RoundsArg::Fixed(n)),
        _ => Err(format!("`{s}`: a number of rounds, at least 2, or `auto`")),
    }
}

fn parse_precision_arg(s: &str) -> Result<f64, String> {
    parse_precision(s).map_err(|_| format!("`{s}`: a percentage above 0 and at most 100, e.g. 2%"))
}

impl JudgeArgs {
    /// The rounds to run at most, and the rule that may stop them earlier.
    pub fn rounds(&self) -> Result<(u32, Option<AutoRounds>), ConfigError> {
        match self.rounds {
            RoundsArg::Fixed(n) => {
                for (flag, given) in [
                    ("--min-rounds", self.min_rounds.is_some()),
                    ("--max-rounds", self.max_rounds.is_some()),
                    ("--precision", self.precision.is_some()),
                ] {
                    if given {
                        return Err(ConfigError {
                            flag,
                            message: "only with --rounds auto".into(),
                        });
                    }
                }
                Ok((n, None))
            }
            RoundsArg::Auto => {
                let rule = AutoRounds::new(
                    self.min_rounds.unwrap_or(MIN_ROUNDS),
                    self.max_rounds.unwrap_or(MAX_ROUNDS),
                    self.precision.unwrap_or(PRECISION_PCT),
                )
                .map_err(|e| {
                    let flag = match e {
                        qbench_core::stats::rounds::RoundsError::Min(_) => "--min-rounds",
                        qbench_core::stats::rounds::RoundsError::Max { .. } => "--max-rounds",
                        qbench_core::stats::rounds::RoundsError::Precision(_) => "--precision",
                    };
                    let text = e.to_string();
                    ConfigError {
                        flag,
                        message: text
                            .split_once(": ")
                            .map_or(text.clone(), |(_, m)| m.to_string()),
                    }
                })?;
                Ok((rule.max, Some(rule)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rounds_are_a_number_or_auto() {
        assert_eq!(parse_rounds("10"), Ok(RoundsArg::Fixed(10)));
        assert_eq!(parse_rounds("auto"), Ok(RoundsArg::Auto));
        for bad in ["1", "0", "-3", "", "Auto", "ten"] {
            assert!(parse_rounds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn warmup_rounds_are_0_to_10() {
        assert_eq!(parse_warmup_rounds("0"), Ok(0));
        assert_eq!(parse_warmup_rounds("10"), Ok(10));
        for bad in ["11", "-1", "", "one", "1.5", "99999999999"] {
            let e = parse_warmup_rounds(bad).unwrap_err();
            assert!(e.contains("from 0 to 10"), "{bad}: {e}");
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,10}") {
            let _ = parse_warmup_rounds(&s);
            let _ = parse_rounds(&s);
            let _ = parse_precision_arg(&s);
            let _ = parse_fdr(&s);
        }
    }
}
