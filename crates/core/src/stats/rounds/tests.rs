use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

use super::*;
use crate::report::compare::ALPHA;
use crate::stats::effect::{assess, Effect, Test};

/// One round's page load time around 1000 us: 3% normal noise, and one round in ten hit by a
/// burst (a loss, a retransmission timeout) that adds 10-30%: skewed and bimodal, as real
/// rounds are.
fn round(rng: &mut StdRng, shift: f64) -> f64 {
    let noise = Normal::new(0.0, 30.0).unwrap().sample(rng);
    let burst = if rng.gen_bool(0.1) {
        rng.gen_range(100.0..300.0)
    } else {
        0.0
    };
    1000.0 + noise + burst + shift
}

struct Simulated {
    covered: u32,
    significant: u32,
    settled: u32,
    rounds: u32,
}

/// `n` comparisons in which B's rounds are A's shifted by `shift`, each run under `rule`
/// with `test`: how often the reported interval holds the true shift, how often the test is
/// significant at ALPHA, how many settled, and the rounds spent.
fn simulate(n: u32, shift: f64, rule: AutoRounds, test: Test, seed: u64) -> Simulated {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = Simulated {
        covered: 0,
        significant: 0,
        settled: 0,
        rounds: 0,
    };
    for _ in 0..n {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        loop {
            a.push(round(&mut rng, 0.0));
            b.push(round(&mut rng, shift));
            let o = assess(test, &a, &b, false);
            let Some(stop) = rule.check(a.len() as u32, o.effect.as_ref()) else {
                continue;
            };
            let e = o.effect.unwrap();
            if e.diff_low.unwrap() <= shift && shift <= e.diff_high.unwrap() {
                s.covered += 1;
            }
            if o.p.unwrap() < ALPHA {
                s.significant += 1;
            }
            s.settled += u32::from(stop == Stopped::Settled);
            s.rounds += a.len() as u32;
            break;
        }
    }
    s
}

const RULE: AutoRounds = AutoRounds {
    min: 5,
    max: 100,
    precision_pct: 2.0,
};

#[test]
fn the_interval_covers_a_known_difference_at_its_level_under_early_stopping() {
    // 1000 comparisons with B 40 us (4%) faster: 95% intervals should hold -40 in about 950
    // (binomial sd 7; the bounds are 4.5 sd).
    let s = simulate(1000, -40.0, RULE, Test::MannWhitney, 1);
    assert!((920..=980).contains(&s.covered), "covered {}", s.covered);
    assert!(s.settled > 900, "settled {}", s.settled);
    // Stopping did happen early: far fewer rounds than the maximum on average.
    assert!(s.rounds < 1000 * 60, "rounds {}", s.rounds);
    assert!(s.rounds > 1000 * RULE.min, "rounds {}", s.rounds);
}

#[test]
fn early_stopping_does_not_inflate_false_positives() {
    // No difference at all: at ALPHA = 1% about 10 of 1000 comparisons are significant by
    // chance (sd 3); more than 25 would mean the rule inflates the error rate.
    for (test, seed) in [(Test::MannWhitney, 2), (Test::Welch, 3)] {
        let s = simulate(1000, 0.0, RULE, test, seed);
        assert!(s.significant <= 25, "{test:?}: {}", s.significant);
        assert!((920..=980).contains(&s.covered), "{test:?}: {}", s.covered);
    }
}

#[test]
fn stops_at_the_maximum_when_the_precision_is_out_of_reach() {
    let rule = AutoRounds::new(5, 12, 0.1).unwrap();
    let s = simulate(20, -40.0, rule, Test::MannWhitney, 4);
    assert_eq!((s.settled, s.rounds), (0, 20 * 12));
}

#[test]
fn check_needs_the_minimum_and_an_interval() {
    let effect = |lo: f64, hi: f64| Effect {
        diff: 0.0,
        diff_low: None,
        diff_high: None,
        rel_pct: Some((lo + hi) / 2.0),
        rel_low_pct: Some(lo),
        rel_high_pct: Some(hi),
        level: 0.95,
    };
    let narrow = effect(4.0, 6.0);
    assert_eq!(RULE.check(4, Some(&narrow)), None);
    assert_eq!(RULE.check(5, Some(&narrow)), Some(Stopped::Settled));
    assert_eq!(RULE.check(5, Some(&effect(1.0, 6.0))), None);
    assert_eq!(RULE.check(5, None), None);
    assert_eq!(RULE.check(100, None), Some(Stopped::MaxRounds));
}

#[test]
fn bad_rules_are_named() {
    assert_eq!(AutoRounds::new(1, 10, 2.0), Err(RoundsError::Min(1)));
    assert_eq!(
        AutoRounds::new(10, 5, 2.0),
        Err(RoundsError::Max { min: 10, max: 5 })
    );
    assert!(AutoRounds::new(5, 10, 0.0).is_err());
    assert!(AutoRounds::new(5, 10, f64::NAN).is_err());
    assert_eq!(parse_precision("2%"), Ok(2.0));
    assert_eq!(parse_precision(" 0.5 "), Ok(0.5));
    for bad in ["", "%", "0", "-1%", "101", "nan", "inf", "2%%"] {
        assert!(parse_precision(bad).is_err(), "{bad}");
    }
}

proptest! {
    #[test]
    fn parse_precision_never_panics(s in ".{0,12}") {
        let _ = parse_precision(&s);
    }
}
