use super::*;

const A: [f64; 10] = [
    812.0, 790.5, 845.2, 801.1, 830.0, 795.7, 808.3, 822.9, 815.4, 799.8,
];
const B: [f64; 10] = [
    760.2, 771.9, 748.3, 790.0, 755.5, 765.1, 780.7, 759.9, 770.3, 752.6,
];

fn close(x: f64, want: f64, tol: f64) {
    assert!((x - want).abs() <= tol, "{x} != {want}");
}

#[test]
fn mann_whitney_matches_scipy() {
    // scipy.stats.mannwhitneyu(a, b) 1.17.1, default method "auto".
    // Both samples above 8: normal approximation.
    let r = mann_whitney(&A, &B).unwrap();
    assert_eq!((r.u, r.exact), (100.0, false));
    close(r.p, 0.000_182_671_791_109_550_02, 1e-13);
    // Ties: normal approximation with the tie correction.
    let r = mann_whitney(&[1.0, 2.0, 3.0, 4.0], &[1.5, 2.5, 2.0, 3.5, 4.0, 1.0]).unwrap();
    assert_eq!((r.u, r.exact, r.p), (12.5, false, 1.0));
    // Small, no ties: exact.
    let e = [3.1, 4.2, 1.7, 5.9, 2.6];
    let f = [6.3, 7.7, 4.8, 8.1, 5.5, 9.0];
    let r = mann_whitney(&e, &f).unwrap();
    assert_eq!((r.u, r.exact), (2.0, true));
    close(r.p, 0.017_316_017_316_017_316, 1e-15);
    // numpy.random.default_rng(7): lognormal(3, 0.5) x25 and lognormal(3.2, 0.5) x30, rounded
    // to 3 decimals: U 229, p 0.013916989631593393.
    let x = [
        20.098, 23.321, 17.513, 12.867, 16.001, 12.233, 20.699, 39.256, 15.704, 14.728, 25.66,
        24.009, 21.173, 12.613, 19.794, 28.436, 10.256, 15.978, 7.763, 10.541, 7.998, 17.858,
        10.658, 23.003, 21.723,
    ];
    let y = [
        22.343, 6.97, 18.74, 23.945, 25.963, 11.415, 19.32, 15.04, 16.372, 41.698, 16.383, 24.137,
        38.176, 18.324, 23.2, 25.926, 25.328, 13.296, 25.484, 48.396, 11.318, 37.701, 26.041,
        17.801, 66.7, 35.914, 13.469, 25.464, 32.732, 22.323,
    ];
    let r = mann_whitney(&x, &y).unwrap();
    assert_eq!(r.u, 229.0);
    close(r.p, 0.013_916_989_631_593_393, 1e-12);
    assert!(mann_whitney(&[], &B).is_none());
    assert!(mann_whitney(&[f64::NAN], &B).is_none());
}

#[test]
fn critical_values_match_the_published_table() {
    // Two-sided 5% critical values of U (reject when U <= c), the table printed in e.g.
    // Siegel & Castellan, "Nonparametric Statistics", Table J.
    for (n1, n2, c) in [
        (5, 6, 3),
        (8, 8, 13),
        (10, 10, 23),
        (15, 15, 64),
        (20, 20, 127),
    ] {
        assert_eq!(critical_u(n1, n2, 0.025), Some(c), "{n1} x {n2}");
    }
    // No interval at 95% from two values each: P(U = 0) = 1/6.
    assert_eq!(critical_u(2, 2, 0.025), None);
    // The normal approximation, past the exact counts, agrees with the table's 20 x 20
    // value within one.
    let approx = critical_u(21, 21, 0.025).unwrap();
    assert!((140..=145).contains(&approx), "{approx}");
}

#[test]
fn u_counts_are_the_gaussian_binomial() {
    // Every arrangement once: the counts add up to C(n1 + n2, n1), and are symmetric.
    let c = u_counts(4, 5);
    assert_eq!(c.iter().sum::<f64>(), 126.0);
    assert_eq!(c.len(), 21);
    assert!(c.iter().zip(c.iter().rev()).all(|(x, y)| x == y));
    assert_eq!(&c[..4], &[1.0, 1.0, 2.0, 3.0]);
}

#[test]
fn hodges_lehmann_of_reference_data() {
    // numpy: the 100 differences b - a sorted; median -45.35, the 24th and 77th of them
    // (c = 23) -60.0 and -30.8.
    let s = hodges_lehmann(&A, &B, 0.95).unwrap();
    close(s.estimate, -45.35, 1e-9);
    close(s.low.unwrap(), -60.0, 1e-9);
    close(s.high.unwrap(), -30.8, 1e-9);
    let tiny = hodges_lehmann(&[1.0, 2.0], &[3.0, 4.0], 0.95).unwrap();
    assert_eq!((tiny.estimate, tiny.low, tiny.high), (2.0, None, None));
    // A pure shift is found exactly.
    let moved: Vec<f64> = A.iter().map(|x| x + 7.5).collect();
    close(
        hodges_lehmann(&A, &moved, 0.95).unwrap().estimate,
        7.5,
        1e-9,
    );
}

#[test]
fn median_ci_uses_the_binomial_order_statistics() {
    // Le Boudec, Table A.1 (95%): n = 10 -> x(2), x(9); n = 20 -> x(6), x(15); n = 100 ->
    // x(40), x(61); below 6 values there is none.
    let ten: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(median_ci(&ten, 0.95), Some((2.0, 9.0)));
    let twenty: Vec<f64> = (1..=20).rev().map(f64::from).collect();
    assert_eq!(median_ci(&twenty, 0.95), Some((6.0, 15.0)));
    let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(median_ci(&hundred, 0.95), Some((40.0, 61.0)));
    assert_eq!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95), None);
    assert_eq!(median_ci(&[], 0.95), None);
}
