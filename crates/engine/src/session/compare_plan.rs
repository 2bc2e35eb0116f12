//! What `qbench compare` runs: two validated configurations, how many rounds, and how they
//! are judged; for flags and scenario cells alike.

use anyhow::Context;
use qbench_core::report::compare::{Undecided, ALPHA};
use qbench_core::spec::threshold::Threshold;
use qbench_core::spec::CompareSpec;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::stats::noise::STEAL_THRESHOLD_PCT;
use qbench_core::stats::rounds::AutoRounds;

use crate::error::usage;
use crate::plan::config::{share_route, Config, LinkChoice, TargetArgs};

/// `--warmup-rounds` when not given: one round of each side before round 0.
pub const DEFAULT_WARMUP_ROUNDS: u32 = 1;

/// The two validated configurations and how to call them.
#[derive(Debug)]
pub struct ComparePlan {
    pub a: Config,
    pub b: Config,
    pub labels: (String, String),
    /// Rounds to run; with `auto`, at most.
    pub rounds: u32,
    pub auto: Option<AutoRounds>,
    /// What the rounds compare, and how.
    pub metric: Metric,
    pub test: Test,
    /// Steal above this flags a run; `discard_noisy` runs such rounds again.
    pub steal_threshold: f64,
    pub discard_noisy: bool,
    /// `--recalibrate`: measure the link again before every round after the first.
    pub recalibrate: bool,
    /// `--fail-if a-worse>P%|b-worse>P%`.
    pub thresholds: Vec<Threshold>,
    /// `--warmup-rounds`: rounds before round 0 that are recorded and never judged.
    pub warmup_rounds: u32,
    /// The command line, as the report records it: the caller's to set (empty from `new`).
    pub command: Vec<String>,
}

impl ComparePlan {
    /// Every check that concerns a comparison as a whole, for flags and scenario cells alike.
    pub fn new(
        spec: &CompareSpec,
        (metric, test): (Option<Metric>, Test),
        target: &TargetArgs,
        link: LinkChoice,
    ) -> anyhow::Result<Self> {
        usage(
            spec.base.runs == 1,
            "--runs",
            "a comparison repeats in --rounds",
        )?;
        usage(
            !spec.base.reuse,
            "--reuse",
            "every round uses fresh connections",
        )?;
        usage(spec.rounds >= 2, "--rounds", "at least 2")?;
        let load = spec.base.load.as_ref();
        let metric = metric.unwrap_or(Metric::default_for_spec(&spec.base));
        metric
            .check(load)
            .map_err(|message| crate::error::ConfigError {
                flag: "--metric",
                message,
            })?;
        usage(
            !metric.is_video() || spec.base.video.is_some(),
            "--metric",
            format!("{metric} is a video session's figure: it needs --video"),
        )?;
        let labels = spec.labels();
        let (sa, sb) = spec.sides();
        let mut sides = [
            Config::new(sa, target, link).context("side A")?,
            Config::new(sb, target, link).context("side B")?,
        ];
        share_route(&mut sides)?;
        // The sides run one after the other.
        for c in &sides {
            crate::setup::fds::check(&[c])?;
        }
        let [a, b] = sides;
        Ok(Self {
            a,
            b,
            labels,
            rounds: spec.rounds,
            auto: spec.auto_rounds,
            metric,
            test,
            steal_threshold: STEAL_THRESHOLD_PCT,
            discard_noisy: false,
            recalibrate: false,
            thresholds: Vec::new(),
            warmup_rounds: DEFAULT_WARMUP_ROUNDS,
            command: Vec::new(),
        })
    }

    /// Why no number of rounds this plan may run lets its test reach significance, if none
    /// does: said before the rounds run, as the verdict will say after them.
    pub fn out_of_reach(&self) -> Option<String> {
        let n = self.rounds as usize;
        let Some(Undecided::TooFewRounds {
            smallest_p, needed, ..
        }) = Undecided::beyond_reach(self.test, n, n)
        else {
            return None;
        };
        let fix = match needed {
            Some(k) => format!("run {k} rounds or more, or judge with --test welch"),
            None => "judge with --test welch".into(),
        };
        Some(format!(
            "{} with {n} rounds a side cannot give p below {ALPHA} (its smallest is {}), \
             so the verdict will be inconclusive however far apart the sides are: {fix}",
            self.test.title(),
            qbench_core::stats::fmt_p(smallest_p)
        ))
    }

    /// Side `side`'s label.
    pub(crate) fn label(&self, side: char) -> &str {
        match side {
            'A' => &self.labels.0,
            _ => &self.labels.1,
        }
    }
}
