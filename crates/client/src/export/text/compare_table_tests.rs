//! The compare table's lines: what a `--fail-if` condition on a side being worse rests on.

use qbench_core::report::compare::Verdict;
use qbench_core::stats::effect::Test;
use qbench_core::Protocol;

use crate::export::html::cell::Cmp;
use crate::export::html::scaling_tests::{judged_cell, round, side};

/// A goodput comparison: A's rounds take `a` seconds per GB, B's `b`.
fn cell(protos: (Protocol, Protocol), a: &[f64], b: &[f64], test: Test) -> Cmp {
    let rounds = |p, secs: &[f64]| {
        let runs = secs
            .iter()
            .enumerate()
            .map(|(i, s)| round(i as u32, 1_000_000_000, *s, None))
            .collect();
        side(p, runs)
    };
    judged_cell(&[], rounds(protos.0, a), rounds(protos.1, b), test)
}

/// A side-worse condition's line says whether its difference was significant: only a
/// significant one counts, so a large difference that passed must not read as a pass on
/// its merits.
#[test]
fn a_worse_condition_says_whether_its_difference_was_significant() {
    use qbench_core::report::thresholds::ThresholdOutcome;
    let gate = |observed: f64| ThresholdOutcome {
        condition: "b-worse>5%".into(),
        metric: "b-worse".into(),
        op: ">".into(),
        limit: 5.0,
        unit: "%".into(),
        observed: Some(observed),
        failed: false,
    };
    let line = |c: &Cmp| {
        super::compare_table::table(&c.report)
            .lines()
            .find(|l| l.contains("b-worse>5%"))
            .unwrap()
            .to_string()
    };
    // Same rounds on both sides: no significant difference.
    let mut same = cell(
        (Protocol::H2, Protocol::H3),
        &[1.0, 1.1, 0.9, 1.0, 1.2, 0.8],
        &[1.1, 0.9, 1.0, 1.2, 0.8, 1.0],
        Test::MannWhitney,
    );
    assert_eq!(same.report.comparison.verdict, Verdict::Inconclusive);
    same.report.thresholds.push(gate(139.7));
    let l = line(&same);
    assert!(
        l.contains("passed (the difference is not significant"),
        "{l}"
    );
    let mut apart = cell(
        (Protocol::H2, Protocol::H3),
        &[1.0; 10],
        &[0.5; 10],
        Test::MannWhitney,
    );
    assert_ne!(apart.report.comparison.verdict, Verdict::Inconclusive);
    apart.report.thresholds.push(gate(-50.0));
    assert!(
        line(&apart).contains("passed (significant, p = "),
        "{}",
        line(&apart)
    );
}
