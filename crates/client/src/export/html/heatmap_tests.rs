//! Heatmap squares follow the verdict: coloured and labelled by the deciding test's effect,
//! never by a difference of means that can point the other way, and the key names the sides.

use qbench_core::report::compare::Verdict;
use qbench_core::stats::effect::Test;
use qbench_core::Protocol;

use super::cell::Cmp;
use super::heatmap::{key, squares};
use super::scaling_tests::{judged_cell, round, side};

const GB: u64 = 1_000_000_000;

/// A goodput comparison on axis `rate = 10mbit` (or none): A's rounds take `a` seconds per
/// GB, B's `b`.
fn cell(protos: (Protocol, Protocol), a: &[f64], b: &[f64], test: Test, axis: bool) -> Cmp {
    let rounds = |p, secs: &[f64]| {
        let runs = secs
            .iter()
            .enumerate()
            .map(|(i, s)| round(i as u32, GB, *s, None))
            .collect();
        side(p, runs)
    };
    let params: &[(&str, &str)] = if axis { &[("rate", "10mbit")] } else { &[] };
    judged_cell(params, rounds(protos.0, a), rounds(protos.1, b), test)
}

/// One A round far out makes A's mean goodput the higher (a difference of means of -41%),
/// while every other round of B beats every other of A: Mann-Whitney decides for B, the
/// QUIC side, and the square is red with the Hodges-Lehmann shift, not blue with the means.
#[test]
fn a_square_shows_the_deciding_tests_effect() {
    let mut a = vec![1.0; 9];
    a.push(0.1);
    let c = cell(
        (Protocol::H2, Protocol::H3),
        &a,
        &[0.9; 10],
        Test::MannWhitney,
        true,
    );
    let cmp = &c.report.comparison;
    assert_eq!(cmp.verdict, Verdict::BFaster, "{cmp:?}");
    assert!(cmp.diff_pct.unwrap() < -30.0, "{cmp:?}");
    let shift = cmp.effect.as_ref().unwrap().rel_pct.unwrap();
    assert!(shift > 0.0, "{shift}");
    let cells = [&c];
    let sq = squares(&cells, "rate", None);
    assert_eq!(sq.len(), 1);
    assert!(sq[0].fill.starts_with("#ff"), "red: {}", sq[0].fill);
    assert_eq!(sq[0].text, format!("{shift:+.0}%"));
    assert_eq!(
        key(std::slice::from_ref(&c)),
        ("QUIC better".to_string(), "TCP better".to_string())
    );
}

/// With h3 on side A the signs turn: QUIC better is still red.
#[test]
fn quic_on_side_a_is_still_red() {
    let c = cell(
        (Protocol::H3, Protocol::H2),
        &[0.5, 0.52, 0.48, 0.51, 0.49],
        &[1.0, 1.02, 0.98, 1.01, 0.99],
        Test::Welch,
        true,
    );
    assert_eq!(c.report.comparison.verdict, Verdict::AFaster);
    let cells = [&c];
    let sq = squares(&cells, "rate", None);
    assert!(sq[0].fill.starts_with("#ff"), "{}", sq[0].fill);
    assert!(sq[0].text.starts_with('+'), "{}", sq[0].text);
}

/// Both sides QUIC (a cwnd-cap sweep) or an A/A control: the key names B and A, not QUIC and
/// TCP. A sweep with no axis still draws its one cell, named by its sides.
#[test]
fn the_key_names_the_sides_and_a_cell_without_axes_is_drawn() {
    let aa = cell(
        (Protocol::H3, Protocol::H3),
        &[1.0, 1.1, 0.9],
        &[1.0, 0.9, 1.1],
        Test::Welch,
        false,
    );
    assert_eq!(
        key(std::slice::from_ref(&aa)),
        (
            "B (h3 (B)) better".to_string(),
            "A (h3 (A)) better".to_string()
        )
    );
    let cells = [&aa];
    let sq = squares(&cells, "", None);
    assert_eq!(sq.len(), 1);
    assert_eq!(sq[0].x, "h3 (A) vs h3 (B)");
    assert_eq!(
        (sq[0].fill.as_str(), sq[0].text.as_str()),
        ("#ffffff", "n.s.")
    );
    let svg = super::heatmap::heatmap("one", "", None, &sq);
    assert!(
        svg.contains("h3 (A) vs h3 (B)") && svg.contains(r#"width="90""#),
        "{svg}"
    );
}

/// A cell one of whose runs the link could not carry is drawn with a dashed border and says
/// so under its effect, in its hover text and in the cell table; a clean cell is plain.
#[test]
fn a_square_the_link_could_not_carry_is_never_plain() {
    use qbench_core::report::link_run::{DelayLineCpu, LinkRun};
    let clean = cell(
        (Protocol::H2, Protocol::H3),
        &[1.0; 10],
        &[0.9; 10],
        Test::MannWhitney,
        true,
    );
    let mut short = cell(
        (Protocol::H2, Protocol::H3),
        &[1.0; 10],
        &[0.9; 10],
        Test::MannWhitney,
        true,
    );
    short.report.b.runs[3].link_check = Some(
        LinkRun {
            delay_line: Some(DelayLineCpu {
                busiest: 0.3,
                waiting: 0.5,
            }),
            ..LinkRun::default()
        }
        .judge(),
    );
    for (c, marked) in [(&clean, false), (&short, true)] {
        let sq = squares(&[c], "rate", None);
        let svg = super::heatmap::heatmap("t", "rate", None, &sq);
        assert_eq!(svg.contains("stroke-dasharray"), marked, "{svg}");
        assert_eq!(svg.contains("! link short"), marked, "{svg}");
        assert_eq!(sq[0].title.contains("link short in 1/20 runs"), marked);
        let table = super::cell_table::cell_table(std::slice::from_ref(c), &["c0".into()]);
        assert_eq!(table.contains("WARNING: link short in 1/20 runs"), marked);
    }
}
