//! The page of `qbench compare --html`: the verdict in words, the compared metric's
//! statistics, both sides' summaries, per-round values, CDFs and cwnd side by side, errors,
//! `--fail-if` outcomes, environment and command line.

use std::fmt::Write as _;

use qbench_core::report::clocks::side_words;
use qbench_core::report::compare::{CompareReport, Verdict, ALPHA};
use qbench_core::stats::fmt_p;
use qbench_core::stats::metric::Metric;
use qbench_core::Stats;

use super::page::{head, END};
use super::run::{distributions_section, over_time_section, status};
use super::sides::{per_round, Side};
use super::tables::{environment_section, errors_section, summary_table, thresholds_section};
use crate::export::escape;

/// Marks a page as a comparison's.
pub const GENERATOR: &str = "qbench compare --html";

/// A relative interval in words, B against A: `rel` is positive where B is better.
fn interval_words(lo: f64, hi: f64) -> String {
    if lo > 0.0 {
        format!("B is between {lo:.1}% and {hi:.1}% better than A")
    } else if hi < 0.0 {
        format!("B is between {:.1}% and {:.1}% worse than A", -hi, -lo)
    } else {
        format!(
            "from B {:.1}% worse to B {hi:.1}% better than A: it includes no difference",
            -lo
        )
    }
}

/// Which side is better, by how much and how sure, in sentences that name each side by its
/// letter and label and say which direction of the metric is better.
pub(super) fn verdict(r: &CompareReport) -> String {
    let c = &r.comparison;
    let m = c.metric;
    let (a, b) = (format!("A ({})", r.label_a), format!("B ({})", r.label_b));
    let better = if m.higher_is_better() {
        "higher"
    } else {
        "lower"
    };
    let mut s = match c.verdict {
        Verdict::AFaster => format!(
            "{a} is better than {b}: its {} is {better}, and the difference is significant.",
            m.title()
        ),
        Verdict::BFaster => format!(
            "{b} is better than {a}: its {} is {better}, and the difference is significant.",
            m.title()
        ),
        Verdict::Inconclusive => format!(
            "Inconclusive: neither side is shown to have the better {}.",
            m.title()
        ),
    };
    let rel = c.effect.as_ref().and_then(|e| e.rel_pct).or(c.diff_pct);
    if let Some(rel) = rel {
        let word = if rel >= 0.0 { "better" } else { "worse" };
        let _ = write!(
            s,
            " {b} is {:.1}% {word} than {a} ({better} {} is better)",
            rel.abs(),
            m.title()
        );
        if let Some(e) = &c.effect {
            let _ = write!(s, "; B minus A is {}", signed(m, e.diff));
            if let (Some(lo), Some(hi)) = (e.rel_low_pct, e.rel_high_pct) {
                let _ = write!(
                    s,
                    "; {:.0}% interval: {}",
                    e.level * 100.0,
                    interval_words(lo, hi)
                );
            }
        }
        s.push('.');
    }
    match (&c.undecided, c.p) {
        (Some(why), _) => {
            let _ = write!(s, " Why undecided: {}.", why.explain(c.test));
        }
        (None, Some(p)) if p < ALPHA => {
            let _ = write!(s, " {}: p = {}, below {ALPHA}.", c.test.title(), fmt_p(p));
        }
        (None, Some(p)) => {
            let _ = write!(
                s,
                " {}: p = {}, not below {ALPHA}: not significant.",
                c.test.title(),
                fmt_p(p)
            );
        }
        (None, None) => {}
    }
    let key = match c.verdict {
        Verdict::AFaster => "a_faster",
        Verdict::BFaster => "b_faster",
        Verdict::Inconclusive => "inconclusive",
    };
    format!(
        "<h2 id=\"verdict-h\">Verdict</h2><p class=\"verdict\" id=\"verdict\" data-verdict=\"{key}\">{}</p>",
        escape::html(&s)
    )
}

/// A difference in the metric's unit with its sign: `+1.20 ms`, `-3.00 Mbit/s`.
fn signed(m: Metric, v: f64) -> String {
    let sign = if v < 0.0 { "-" } else { "+" };
    format!("{sign}{}", m.show(v.abs()))
}

/// The compared metric over each side's rounds.
fn metric_table(r: &CompareReport) -> String {
    let m = r.comparison.metric;
    let show = |v: Option<f64>| v.map_or("-".into(), |v| m.show(v));
    type Of = fn(&Stats) -> Option<f64>;
    let rows: [(&str, Of); 5] = [
        ("mean", |s| s.mean),
        ("median", |s| s.median),
        ("standard deviation", |s| s.sd),
        ("min", |s| s.min),
        ("max", |s| s.max),
    ];
    let mut html = format!(
        "<div class=\"scroll\"><table id=\"metric\"><tr><th class=\"w\">{} over rounds</th><th>A: {}</th><th>B: {}</th></tr><tr><td class=\"k\">rounds with a value</td><td>{}</td><td>{}</td></tr>",
        escape::html(m.title()),
        escape::html(&r.label_a),
        escape::html(&r.label_b),
        r.comparison.a.n,
        r.comparison.b.n
    );
    for (name, f) in rows {
        let _ = write!(
            html,
            "<tr><td class=\"k\">{name}</td><td>{}</td><td>{}</td></tr>",
            escape::html(&show(f(&r.comparison.a))),
            escape::html(&show(f(&r.comparison.b)))
        );
    }
    let _ = write!(
        html,
        "<tr><td class=\"k\">times by</td><td>{}</td><td>{}</td></tr>",
        escape::html(&side_words(&r.a.runs)),
        escape::html(&side_words(&r.b.runs))
    );
    let warm = |runs: &[qbench_core::RunReport]| {
        let v: Vec<String> = runs
            .iter()
            .map(|run| m.of(run).map_or("-".into(), |v| m.show(v)))
            .collect();
        v.join(", ")
    };
    let _ = write!(
        html,
        "<tr><td class=\"k\">warm-up (not judged)</td><td>{}</td><td>{}</td></tr>",
        escape::html(&warm(&r.warmup.a)),
        escape::html(&warm(&r.warmup.b))
    );
    html.push_str("</table></div>");
    html
}

/// A report whose recorded histograms cannot be decoded fails the page.
pub fn page(r: &CompareReport) -> anyhow::Result<String> {
    let name = format!("{} vs {}", r.label_a, r.label_b);
    let (la, lb) = (format!("A: {}", r.label_a), format!("B: {}", r.label_b));
    let sides: [Side<'_>; 2] = [(&la, &r.a), (&lb, &r.b)];
    let mut html = head(&format!("compare {name}"), GENERATOR);
    let _ = write!(
        html,
        "<h1>qbench compare: {}</h1><p>Started {}; {} round(s) after {} warm-up round(s), the sides taking turns to go first (A in even rounds); judged by {} with {}.</p>",
        escape::html(&name),
        escape::html(&r.a.started_at),
        r.rounds,
        r.warmup.first.len(),
        escape::html(r.comparison.metric.title()),
        escape::html(r.comparison.test.title())
    );
    html.push_str(&status(r.complete, r.aborted.as_deref()));
    html.push_str(&verdict(r));
    html.push_str(&metric_table(r));
    html.push_str("<h2 id=\"summary-h\">Summary</h2>");
    html.push_str(&summary_table(&sides));
    let _ = write!(
        html,
        "<h2 id=\"per-round\">Per round</h2><div class=\"charts\">{}</div>",
        per_round(&name, r.comparison.metric, &sides)
    );
    html.push_str(&over_time_section(&name, "round", &sides));
    html.push_str(&distributions_section(&name, &sides)?);
    html.push_str(&errors_section(&sides));
    html.push_str(&thresholds_section(&r.thresholds));
    // Both sides run on one machine; a side B that reports another environment (a
    // sysctl changed between rounds) shows it.
    let other = (serde_json::to_value(&r.a.environment)?
        != serde_json::to_value(&r.b.environment)?)
    .then_some(("Side B's environment", &r.b.environment));
    html.push_str(&environment_section(&r.a.environment, other, &r.a.command)?);
    html.push_str(END);
    Ok(html)
}
