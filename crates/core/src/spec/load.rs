//! Holding a load: for a duration at `--streams` per connection (closed loop), or at a rate
//! whose requests start at intended times that never wait for responses (open loop).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp, Poisson};
use serde::{Deserialize, Serialize};

/// Requests per second above this are refused: no client here gets near it, and the
/// schedule's arithmetic stays exact in microseconds.
pub const MAX_RATE: f64 = 10_000_000.0;
/// In-flight requests allowed by default in open-loop mode, over all connections.
pub const DEFAULT_MAX_INFLIGHT: u32 = 10_000;
/// The longest load held: a month, so every offset on the run clock stays far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// A request sent later than this after its intended start counts as late. tokio's timer
/// ticks in milliseconds, so a start up to 1 ms after its time is on time.
pub const LATE_AFTER: Duration = Duration::from_millis(2);
/// Open loop: a request that could not be sent within this of its intended start is dropped
/// (and counted in `dropped_late`) instead of sent, so a client past its capacity keeps to
/// the schedule's present and its run ends at its duration, not when the backlog is worked
/// off.
pub const MAX_LAG: Duration = Duration::from_secs(1);

/// How the intended start times of an open-loop run are spaced.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Exactly 1/rate apart.
    #[default]
    Constant,
    /// Exponential gaps of mean 1/rate (a Poisson process), from a fixed seed per run.
    Poisson,
}

/// A load held for a time; recorded in the report's `config.load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Load {
    /// How long requests are started, warm-up included.
    #[serde(rename = "duration_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub duration: Duration,
    /// Requests started before this are run but left out of every figure.
    #[serde(rename = "warmup_ms", with = "crate::serde_ms::ms")]
    #[schemars(with = "u64")]
    pub warmup: Duration,
    /// Open loop: requests per second over all connections. `None`: closed loop.
    pub rate: Option<f64>,
    pub arrivals: Arrivals,
    /// Open loop: a request due while this many are in flight is dropped, not delayed.
    pub max_inflight: u32,
}

impl Load {
    /// Checked: a one-line reason naming the flag otherwise.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.duration.is_zero() {
            return Err(("--duration", "must be greater than zero".into()));
        }
        if self.duration > MAX_DURATION {
            return Err(("--duration", "at most 30 days".into()));
        }
        if self.warmup >= self.duration {
            return Err((
                "--warmup",
                format!(
                    "{:?} leaves nothing to measure in a --duration of {:?}",
                    self.warmup, self.duration
                ),
            ));
        }
        if let Some(r) = self.rate {
            check_rate(r).map_err(|e| ("--rate", e))?;
        }
        if self.max_inflight == 0 {
            return Err(("--max-inflight", "must be at least 1".into()));
        }
        Ok(())
    }

    /// The measured window: from the end of the warm-up to the end of the duration.
    pub fn window(&self) -> Duration {
        self.duration.saturating_sub(self.warmup)
    }
}

fn check_rate(r: f64) -> Result<(), String> {
    if !r.is_finite() || r <= 0.0 {
        return Err(format!(
            "`{r}` is not a positive number of requests per second"
        ));
    }
    if r > MAX_RATE {
        return Err(format!("at most {MAX_RATE} requests per second"));
    }
    // Below one request per hour the schedule would outlast any duration.
    if r < 1.0 / 3600.0 {
        return Err("at least one request per hour".into());
    }
    Ok(())
}

/// `--rate`: requests per second, e.g. `20000`, `20k`, `1.5M`, `0.5`.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a number of requests per second (e.g. 20000, 20k)"))?;
    let r = v * mult;
    check_rate(r)?;
    Ok(r)
}

/// Intended start times, as offsets from the start of the schedule.
pub struct Schedule {
    rate: f64,
    next: u64,
    poisson: Option<(StdRng, Exp<f64>)>,
    at: f64,
}

impl Schedule {
    /// `seed` makes a Poisson schedule reproducible; the run's index is used.
    pub fn new(rate: f64, arrivals: Arrivals, seed: u64) -> Self {
        let poisson = match arrivals {
            Arrivals::Constant => None,
            Arrivals::Poisson => Some((
                StdRng::seed_from_u64(seed),
                Exp::new(rate).expect("a checked rate is positive and finite"),
            )),
        };
        Self {
            rate,
            next: 0,
            poisson,
            at: 0.0,
        }
    }

    /// The next request's intended start, in seconds from the start. Constant spacing is
    /// computed from the index, so no error accumulates over millions of requests.
    pub fn next_secs(&mut self) -> f64 {
        let t = match &mut self.poisson {
            None => self.next as f64 / self.rate,
            Some((rng, exp)) => {
                let t = self.at;
                self.at += exp.sample(rng);
                t
            }
        };
        self.next += 1;
        t
    }
}

impl Schedule {
    /// Skips every request due before `t` seconds from the start, returning how many. A
    /// constant schedule goes on at the first index due at or after `t`; a Poisson one draws
    /// how many arrivals the skipped stretch held and restarts after `t` (the process has no
    /// memory, so what follows is distributed as if nothing had been skipped).
    pub fn skip_to(&mut self, t: f64) -> u64 {
        if !t.is_finite() || t <= 0.0 {
            return 0;
        }
        match &mut self.poisson {
            None => {
                let due = |j: u64| j as f64 / self.rate;
                let mut first = (t * self.rate).ceil().min(u64::MAX as f64) as u64;
                while first > 0 && due(first - 1) >= t {
                    first -= 1;
                }
                while due(first) < t && first < u64::MAX {
                    first += 1;
                }
                let skipped = first.saturating_sub(self.next);
                self.next = self.next.max(first);
                skipped
            }
            Some((rng, exp)) => {
                if self.at >= t {
                    return 0;
                }
                // The pending arrival at `self.at`, and those strictly between it and `t`.
                let lambda = self.rate * (t - self.at);
                let between = Poisson::new(lambda).map_or(0, |p| p.sample(rng) as u64);
                self.at = t + exp.sample(rng);
                let skipped = between.saturating_add(1);
                self.next = self.next.saturating_add(skipped);
                skipped
            }
        }
    }
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.next_secs()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constant_spacing_is_exact() {
        let s = Schedule::new(20_000.0, Arrivals::Constant, 0);
        let t: Vec<Duration> = s.take(100_001).collect();
        assert_eq!(t[0], Duration::ZERO);
        assert_eq!(t[1], Duration::from_micros(50));
        assert_eq!(t[100_000], Duration::from_secs(5));
        assert!(t
            .windows(2)
            .all(|w| w[1] - w[0] == Duration::from_micros(50)));
    }

    /// Over 100,000 draws the mean gap of a Poisson schedule is within 2% of 1/rate (the
    /// standard error is 1/sqrt(100,000) = 0.3% of the mean: 2% is over six of them), and
    /// the same seed gives the same schedule.
    #[test]
    fn poisson_gaps_average_one_over_the_rate() {
        let n = 100_000;
        let last = Schedule::new(1000.0, Arrivals::Poisson, 7).nth(n).unwrap();
        let mean = last.as_secs_f64() / n as f64;
        assert!((mean - 0.001).abs() < 0.00002, "mean gap {mean}");
        let a: Vec<_> = Schedule::new(1000.0, Arrivals::Poisson, 7)
            .take(10)
            .collect();
        let b: Vec<_> = Schedule::new(1000.0, Arrivals::Poisson, 7)
            .take(10)
            .collect();
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
    }

    /// A constant schedule skips exactly the requests due before the point, and goes on with
    /// the first due at or after it.
    #[test]
    fn skipping_a_constant_schedule_is_exact() {
        for (rate, t) in [
            (20_000.0, 0.5),
            (3.0, 1.0),
            (7.0, 0.99),
            (10_000_000.0, 1.0),
        ] {
            let mut s = Schedule::new(rate, Arrivals::Constant, 0);
            let first = s.next_secs();
            assert_eq!(first, 0.0);
            let skipped = s.skip_to(t);
            let expected = Schedule::new(rate, Arrivals::Constant, 0)
                .map(|d| d.as_secs_f64())
                .take_while(|&d| d < t)
                .count() as u64
                - 1;
            assert_eq!(skipped, expected, "rate {rate}, t {t}");
            let next = s.next_secs();
            assert!(next >= t && next - t < 1.0 / rate, "{next}");
        }
        let mut s = Schedule::new(100.0, Arrivals::Constant, 0);
        assert_eq!(s.skip_to(-1.0) + s.skip_to(f64::NAN) + s.skip_to(0.0), 0);
        assert_eq!(s.skip_to(1.0), 100);
        assert_eq!(s.skip_to(0.5), 0, "nothing is skipped twice");
    }

    /// A Poisson schedule skips about rate x stretch requests, and carries on after the point.
    #[test]
    fn skipping_a_poisson_schedule_draws_the_stretch() {
        let mut s = Schedule::new(1_000_000.0, Arrivals::Poisson, 3);
        let skipped = s.skip_to(10.0);
        // 10,000,000 expected, standard deviation about 3,162: 0.5% is over 15 of them.
        assert!(skipped.abs_diff(10_000_000) < 50_000, "{skipped}");
        assert!(s.next_secs() >= 10.0);
    }

    proptest! {
        /// Skipping never panics, and what comes next is due at or after the point.
        #[test]
        fn skipping_never_panics(rate in 0.001f64..MAX_RATE, t in -10.0f64..1e7, poisson: bool) {
            let arrivals = if poisson { Arrivals::Poisson } else { Arrivals::Constant };
            let mut s = Schedule::new(rate, arrivals, 1);
            s.skip_to(t);
            let next = s.next_secs();
            prop_assert!(next >= t.max(0.0), "{next} < {t}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("20000"), Ok(20_000.0));
        assert_eq!(parse_rate("20k"), Ok(20_000.0));
        assert_eq!(parse_rate("1.5M"), Ok(1_500_000.0));
        assert_eq!(parse_rate("0.5"), Ok(0.5));
        for bad in [
            "0", "-5", "abc", "", "k", "NaN", "inf", "1e300", "20000000", "1e-9",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loads_are_checked() {
        let ok = Load {
            duration: Duration::from_secs(30),
            warmup: Duration::from_secs(5),
            rate: Some(100.0),
            arrivals: Arrivals::Constant,
            max_inflight: 10,
        };
        assert!(ok.check().is_ok());
        assert_eq!(ok.window(), Duration::from_secs(25));
        let flag = |l: Load| l.check().unwrap_err().0;
        assert_eq!(
            flag(Load {
                duration: Duration::ZERO,
                ..ok.clone()
            }),
            "--duration"
        );
        assert_eq!(
            flag(Load {
                warmup: Duration::from_secs(30),
                ..ok.clone()
            }),
            "--warmup"
        );
        assert_eq!(
            flag(Load {
                max_inflight: 0,
                ..ok.clone()
            }),
            "--max-inflight"
        );
    }

    proptest! {
        #[test]
        fn rate_parser_never_panics(s in "\\PC{0,20}") {
            let _ = parse_rate(&s);
        }

        #[test]
        fn any_load_is_checked_without_a_panic(
            d in any::<u64>(), w in any::<u64>(), r in any::<f64>(), m in any::<u32>()
        ) {
            let l = Load {
                duration: Duration::from_millis(d),
                warmup: Duration::from_millis(w),
                rate: Some(r),
                arrivals: Arrivals::Poisson,
                max_inflight: m,
            };
            if l.check().is_ok() {
                prop_assert!(l.window() > Duration::ZERO);
            }
        }

        #[test]
        fn any_accepted_rate_schedules(r in 0.0f64..2e7, poisson: bool) {
            if let Ok(r) = parse_rate(&r.to_string()) {
                let a = if poisson { Arrivals::Poisson } else { Arrivals::Constant };
                let mut s = Schedule::new(r, a, 1);
                for _ in 0..10 {
                    prop_assert!(s.next().is_some());
                }
            }
        }
    }
}
