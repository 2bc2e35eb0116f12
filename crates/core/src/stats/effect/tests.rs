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
