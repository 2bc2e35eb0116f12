use super::*;

// Page load times in microseconds: B is about 46 us (5.7%) faster.
const A: [f64; 10] = [
    812.0, 790.5, 845.2, 801.1, 830.0, 795.7, 808.3, 822.9, 815.4, 799.8,
];
const B: [f64; 10] = [
    760.2, 771.9, 748.3, 790.0, 755.5, 765.1, 780.7, 759.9, 770.3, 752.6,
];

fn close(x: Option<f64>, want: f64, tol: f64) {
    let x = x.expect("a value");
    assert!((x - want).abs() <= tol, "{x} != {want}");
}

#[test]
fn welch_interval_matches_scipy() {
    // scipy.stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95) 1.17.1:
    // (-60.85781149245656, -32.42218850754318); mean(b) - mean(a) = -46.64.
    let o = assess(Test::Welch, &A, &B, false);
    let e = o.effect.unwrap();
    close(Some(e.diff), -46.64, 1e-9);
    close(e.diff_low, -60.857_811_492_456_56, 1e-9);
    close(e.diff_high, -32.422_188_507_543_18, 1e-9);
    // Lower is better: B's shorter times are a positive relative difference, of mean(a).
    close(e.rel_pct, 46.64 / 812.09 * 100.0, 1e-9);
    close(e.rel_low_pct, 32.422_188_507_543_18 / 812.09 * 100.0, 1e-9);
    close(e.rel_high_pct, 60.857_811_492_456_56 / 812.09 * 100.0, 1e-9);
    close(o.statistic, 6.924_582_863_250_035, 1e-9);
    close(o.p, 2.548_744_314_582_955e-6, 1e-12);
}

#[test]
fn mann_whitney_reports_the_hodges_lehmann_shift() {
    let o = assess(Test::MannWhitney, &A, &B, false);
    let e = o.effect.unwrap();
    // See nonparam's tests for the shift and its interval; relative to A's median 810.15.
    close(Some(e.diff), -45.35, 1e-9);
    close(e.rel_pct, 45.35 / 810.15 * 100.0, 1e-9);
    close(e.rel_low_pct, 30.8 / 810.15 * 100.0, 1e-9);
    close(e.rel_high_pct, 60.0 / 810.15 * 100.0, 1e-9);
    assert_eq!(o.statistic, Some(100.0));
    // Higher is better (a rate): the same numbers are a loss for B.
    let rate = assess(Test::MannWhitney, &A, &B, true).effect.unwrap();
    assert!(rate.rel_pct.unwrap() < 0.0 && rate.rel_high_pct.unwrap() < 0.0);
    assert!(rate.rel_low_pct.unwrap() <= rate.rel_high_pct.unwrap());
}

#[test]
fn bootstrap_reports_the_median_difference() {
    let o = assess(Test::Bootstrap, &A, &B, false);
    let e = o.effect.unwrap();
    close(Some(e.diff), 762.65 - 810.15, 1e-9);
    close(e.rel_pct, 5.863_111_769_425_402, 1e-9);
    let (lo, hi) = (e.rel_low_pct.unwrap(), e.rel_high_pct.unwrap());
    assert!(lo < 5.86 && 5.86 < hi, "{lo} {hi}");
    assert!(e.half_width_pct().unwrap() > 0.0);
    assert!(o.p.unwrap() < 0.001);
}

#[test]
fn too_few_rounds_give_no_interval_and_no_panic() {
    for test in [Test::Welch, Test::MannWhitney, Test::Bootstrap] {
        let o = assess(test, &[1.0], &[2.0], false);
        assert!(
            o.effect.as_ref().and_then(Effect::half_width_pct).is_none(),
            "{test:?}"
        );
        let none = assess(test, &[], &[], true);
        assert!(none.effect.is_none() && none.p.is_none(), "{test:?}");
    }
}

/// Mann-Whitney's exact p cannot go below 2 / C(2n, n): 0.1 with 3 a side, 0.029 with 4,
/// 0.0079 with 5, so 5 rounds are the fewest that can reach p < 0.01. Welch's and the
/// bootstrap's reach it with 2.
#[test]
fn the_smallest_p_each_test_can_give() {
    let mw = Test::MannWhitney;
    close(mw.smallest_p(3, 3), 0.1, 1e-12);
    close(mw.smallest_p(4, 4), 2.0 / 70.0, 1e-12);
    close(mw.smallest_p(5, 5), 2.0 / 252.0, 1e-12);
    close(mw.smallest_p(4, 6), 2.0 / 210.0, 1e-12);
    assert_eq!(mw.smallest_p(0, 5), None);
    // Past 8 a side the normal approximation: far below any alpha.
    assert!(mw.smallest_p(10, 10).unwrap() < 1e-3);
    assert_eq!(mw.rounds_needed(0.01, 100), Some(5));
    assert_eq!(mw.rounds_needed(0.05, 100), Some(4));
    assert_eq!(mw.rounds_needed(0.01, 4), None);
    assert_eq!(Test::Welch.rounds_needed(0.01, 100), Some(2));
    assert_eq!(Test::Welch.smallest_p(1, 5), None);
    assert_eq!(Test::Bootstrap.rounds_needed(0.01, 100), Some(2));
    // The bound is what the test gives to sides that do not overlap, exact or approximate.
    for (na, nb) in [(4, 4), (3, 9), (9, 12), (20, 20)] {
        let a: Vec<f64> = (0..na).map(|i| 100.0 + i as f64).collect();
        let b: Vec<f64> = (0..nb).map(|i| i as f64).collect();
        let p = assess(mw, &a, &b, false).p.unwrap();
        close(mw.smallest_p(na, nb), p, 1e-12);
    }
    // Any count, without holding the values: a --rounds of 4 billion is a number, not 64 GB.
    assert!(mw.smallest_p(4_000_000_000, 4_000_000_000).unwrap() < 1e-100);
    assert!(mw.smallest_p(2, 4_000_000_000).unwrap() < 1e-15);
}

/// A/A: both sides drawn from one skewed distribution (log-normal, like latencies). Each
/// test calls a difference at p < 0.01 in at most its share of trials, with room for chance
/// (binomial: mean 1%, three standard deviations above).
#[test]
fn identical_sides_are_called_different_at_most_at_alpha() {
    use rand::SeedableRng;
    use rand_distr::Distribution;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let skewed = rand_distr::LogNormal::new(100f64.ln(), 0.3).unwrap();
    let mut draw = |n: usize| -> Vec<f64> { (0..n).map(|_| skewed.sample(&mut rng)).collect() };
    for (test, trials) in [
        (Test::Welch, 2000),
        (Test::MannWhitney, 2000),
        (Test::Bootstrap, 200),
    ] {
        let called = (0..trials)
            .filter(|_| {
                let (a, b) = (draw(10), draw(10));
                assess(test, &a, &b, false).p.is_some_and(|p| p < 0.01)
            })
            .count() as f64;
        let n = trials as f64;
        let bound = n * 0.01 + 3.0 * (n * 0.01 * 0.99).sqrt();
        assert!(called <= bound, "{}: {called} of {trials}", test.name());
    }
}
