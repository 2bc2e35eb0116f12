//! The tables of `qbench report`: one row per comparison cell, linked to its section, with
//! the one effect the page shows (the deciding test's, as the heatmap and the verdict), and
//! one row per competition.

use std::fmt::Write as _;

use qbench_core::report::compare::{CompareReport, Verdict};
use qbench_core::report::compete::CompeteReport;
use qbench_core::scenario::Cell;
use qbench_core::stats::effect::Test;
use qbench_core::stats::fmt_p;
use qbench_core::Stats;

use super::cell::{caveat, title, Cmp};
use crate::export::escape;

fn verdict_text(r: &CompareReport) -> String {
    match r.comparison.verdict {
        Verdict::AFaster => format!("{} better", r.label_a),
        Verdict::BFaster => format!("{} better", r.label_b),
        Verdict::Inconclusive => match &r.comparison.undecided {
            Some(why) => format!("inconclusive: {}", why.short()),
            None => "inconclusive".to_string(),
        },
    }
}

/// The whole reason an inconclusive verdict has, for the cell's hover text.
fn verdict_title(r: &CompareReport) -> String {
    r.comparison
        .undecided
        .as_ref()
        .map_or(String::new(), |why| why.explain(r.comparison.test))
}

/// What the test compares of each side: means for Welch, medians for the rank test (whose
/// Hodges-Lehmann shift is a median) and the bootstrap. A mean beside a median's effect could
/// point the other way.
fn centre(test: Test) -> (&'static str, fn(&Stats) -> Option<f64>) {
    match test {
        Test::Welch => ("mean", |s| s.mean),
        Test::MannWhitney | Test::Bootstrap => ("median", |s| s.median),
    }
}

/// The heads of the two centre columns: the statistic's name when every cell's test shares it.
fn centre_heads(cells: &[Cmp]) -> [String; 2] {
    let mut names = cells.iter().map(|c| centre(c.report.comparison.test).0);
    let first = names.next().unwrap_or("mean");
    let name = if names.all(|n| n == first) {
        first
    } else {
        "mean or median"
    };
    [format!("{name} A"), format!("{name} B")]
}

fn rounds(r: &CompareReport) -> String {
    match &r.auto_rounds {
        Some(a) => format!(
            "{} (auto{})",
            r.rounds,
            match a.stopped {
                Some(qbench_core::stats::rounds::Stopped::MaxRounds) => ", max",
                _ => "",
            }
        ),
        None => r.rounds.to_string(),
    }
}

/// The deciding test's relative effect and its interval, positive where B is better.
fn effect(c: &Cmp) -> String {
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:+.1}%"));
    c.report.comparison.effect.as_ref().map_or("-".into(), |e| {
        match (e.rel_low_pct, e.rel_high_pct) {
            (Some(_), Some(_)) => format!(
                "{} [{}, {}]",
                pct(e.rel_pct),
                pct(e.rel_low_pct),
                pct(e.rel_high_pct)
            ),
            _ => pct(e.rel_pct),
        }
    })
}

/// One row per cell, in the page's order; `ids[i]` is the anchor of cell `i`'s section. A
/// metric and a test that every cell shares are named once above the table, not in a column
/// each.
pub(super) fn cell_table(cells: &[Cmp], ids: &[String]) -> String {
    let fdr = cells.iter().any(|c| c.fdr.is_some());
    let [ca, cb] = centre_heads(cells);
    let judged = |c: &Cmp| (c.report.comparison.metric, c.report.comparison.test);
    let shared = cells
        .first()
        .map(judged)
        .filter(|first| cells.iter().all(|c| judged(c) == *first));
    let mut html = String::from("<h2 id=\"cells\">Cells</h2>");
    if let Some((m, t)) = shared {
        let _ = write!(
            html,
            "<p>Every cell is judged by {} with {}.</p>",
            escape::html(m.title()),
            escape::html(t.title())
        );
    }
    let judged_heads = match shared {
        Some(_) => String::new(),
        None => "<th>metric</th><th>test</th>".into(),
    };
    let _ = writeln!(
        html,
        "<div class=\"scroll\"><table><tr><th>cell</th><th>A</th><th>B</th><th>rounds</th>{judged_heads}<th>{ca}</th><th>{cb}</th><th>effect, B better + [95% interval]</th><th>p</th>{}<th>noisy runs, rounds dropped</th><th>verdict</th></tr>",
        if fdr { "<th>q (FDR)</th>" } else { "" }
    );
    for (c, id) in cells.iter().zip(ids) {
        let r = &c.report;
        let cmp = &r.comparison;
        let m = cmp.metric;
        let (_, of) = centre(cmp.test);
        let show = |s: &Stats| of(s).map_or("-".into(), |v| m.show(v));
        let q = match c.fdr {
            Some((q, _)) => format!("<td>{}</td>", fmt_p(q)),
            None if fdr => "<td>-</td>".into(),
            None => String::new(),
        };
        let dropped = c.fdr.is_some_and(|(_, kept)| !kept) && cmp.verdict != Verdict::Inconclusive;
        let verdict = format!(
            "{}{}{}",
            verdict_text(r),
            if dropped { " (not kept by FDR)" } else { "" },
            caveat(c).map_or(String::new(), |w| format!(" (WARNING: {w})"))
        );
        let noisy =
            r.a.runs
                .iter()
                .chain(&r.b.runs)
                .filter(|run| run.noise.as_ref().is_some_and(|n| n.noisy))
                .count();
        let judged = match shared {
            Some(_) => String::new(),
            None => format!("<td>{}</td><td>{}</td>", m.name(), cmp.test.name()),
        };
        let _ = writeln!(
            html,
            "<tr><td class=\"w\"><a href=\"#{id}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>{judged}<td>{}</td><td>{}</td><td>{}</td><td>{}</td>{q}<td>{noisy}, {}</td><td class=\"w\" title=\"{}\">{}</td></tr>",
            escape::html(&title(&c.cell)),
            escape::html(&r.label_a),
            escape::html(&r.label_b),
            rounds(r),
            show(&cmp.a),
            show(&cmp.b),
            effect(c),
            cmp.p.map_or("-".into(), fmt_p),
            r.discarded.len(),
            escape::html(&verdict_title(r)),
            escape::html(&verdict)
        );
    }
    html.push_str("</table></div>");
    html
}

/// Each flow as `label: goodput` in Mbit/s.
fn flow_goodputs(c: &CompeteReport) -> String {
    c.flows
        .iter()
        .map(|f| {
            format!(
                "{}: {}",
                f.label,
                f.goodput_bps
                    .map_or("-".into(), |g| format!("{:.2}", g / 1e6))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Empty for a sweep without competitions.
pub(super) fn competitions_table(competitions: &[(Cell, CompeteReport)]) -> String {
    let mut html = String::new();
    if competitions.is_empty() {
        return html;
    }
    html.push_str("<h2>Competitions</h2><div class=\"scroll\"><table><tr><th>cell</th><th>flows (goodput, Mbit/s)</th><th>Jain's index</th></tr>");
    for (cell, c) in competitions {
        let _ = writeln!(
            html,
            "<tr><td class=\"w\">{}</td><td class=\"w\">{}</td><td>{}</td></tr>",
            escape::html(&title(cell)),
            escape::html(&flow_goodputs(c)),
            c.jain_index.map_or("-".into(), |j| format!("{j:.3}"))
        );
    }
    html.push_str("</table></div>");
    html
}
