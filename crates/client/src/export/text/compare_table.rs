//! The text table of `qbench compare`: both sides' figures in columns, then the difference,
//! the test, the rounds, the noise and the verdict, one line each.

use qbench_core::report::clocks::side_words;
use qbench_core::report::compare::{CompareReport, Comparison, Verdict};
use qbench_core::report::load::LoadSummary;
use qbench_core::stats::effect::Test;
use qbench_core::stats::fmt_p;
use qbench_core::stats::noise::{Losses, NoiseCause};
use qbench_core::stats::rounds::Stopped;
use qbench_core::{Report, Stats};

use super::numbers::count;

pub fn table(r: &CompareReport) -> String {
    let mut out = format!(
        "qbench compare: A = {}, B = {}, {} rounds, alternating first; comparing {}\n",
        r.label_a,
        r.label_b,
        r.rounds,
        r.comparison.metric.title()
    );
    out.push_str(&format!(
        "  {:<20}A by {}; B by {}\n",
        "times",
        side_words(&r.a.runs),
        side_words(&r.b.runs)
    ));
    out.push_str(&warmup_line(r));
    out.push_str(&side_by_side(r));
    out.push_str(&difference_lines(&r.comparison));
    out.push_str(&rounds_line(r));
    out.push_str(&noise_line(r));
    out.push_str(&losses_line(r));
    out.push_str(&verdict_line(r));
    for t in &r.thresholds {
        out.push_str(&format!(
            "  {:<20}{}{}\n",
            "fail-if",
            super::run::gate_line(t),
            significance(r, t)
        ));
    }
    out.push_str(&side_notes(r));
    out
}

/// What a side-worse condition's difference rests on: only a significant difference counts
/// against the limit, so a large one that passed says it was not significant.
fn significance(
    r: &CompareReport,
    t: &qbench_core::report::thresholds::ThresholdOutcome,
) -> String {
    if t.metric != "a-worse" && t.metric != "b-worse" {
        return String::new();
    }
    let p = r
        .comparison
        .p
        .map_or(String::new(), |p| format!(", p = {}", fmt_p(p)));
    match r.comparison.verdict {
        Verdict::Inconclusive => {
            format!(" (the difference is not significant{p}: only a significant one counts)")
        }
        _ => format!(" (significant{p})"),
    }
}

/// A figure of both sides, in the table's columns.
fn columns(name: &str, [a, b]: [String; 2]) -> String {
    format!("  {name:<20}{a:>18}{b:>18}\n")
}

/// Per side: a figure summed over its runs.
fn per_side(r: &CompareReport, f: &dyn Fn(&Report) -> String) -> [String; 2] {
    [f(&r.a), f(&r.b)]
}

/// The metric's statistics, the runs and requests, and a held load's rates, per side.
fn side_by_side(r: &CompareReport) -> String {
    let c = &r.comparison;
    let m = c.metric;
    let mut out = columns("", ["A".into(), "B".into()]);
    let show = |v: Option<f64>| v.map_or("-".into(), |v| m.show(v));
    for (what, f) in [
        ("mean", (|s: &Stats| s.mean) as fn(&Stats) -> Option<f64>),
        ("median", |s| s.median),
        ("sd", |s| s.sd),
    ] {
        out.push_str(&columns(
            &format!("{} {what}", m.title()),
            [show(f(&c.a)), show(f(&c.b))],
        ));
    }
    out.push_str(&columns(
        "complete runs",
        per_side(r, &|rep| {
            format!("{}/{}", rep.summary.complete_runs, r.rounds)
        }),
    ));
    out.push_str(&columns(
        "failed requests",
        per_side(r, &|rep| {
            count(rep.runs.iter().map(|run| run.objects.failed).sum::<u64>())
        }),
    ));
    out.push_str(&load_columns(r));
    out
}

/// Empty unless a side held a load.
fn load_columns(r: &CompareReport) -> String {
    if r.a.summary.load.is_none() && r.b.summary.load.is_none() {
        return String::new();
    }
    let load = |f: &dyn Fn(&LoadSummary) -> String| {
        per_side(r, &|rep| rep.summary.load.as_ref().map_or("-".into(), f))
    };
    let mut out = columns(
        "completed/s (mean)",
        load(&|l| {
            l.completed_rate
                .mean
                .map_or("-".into(), |v| format!("{v:.1}"))
        }),
    );
    out.push_str(&columns(
        "late, dropped",
        load(&|l| format!("{}, {}", count(l.late), count(l.dropped))),
    ));
    out
}

/// The chosen test's effect, one sign convention (positive: B better) and the metric's own
/// words for the raw difference, then the test's statistic and p. Welch's figures, which
/// IMC'17 reported whatever the test, stay in the JSON.
fn difference_lines(c: &Comparison) -> String {
    let m = c.metric;
    let what = match c.test {
        Test::Welch => "difference of means",
        Test::MannWhitney => "Hodges-Lehmann shift: the median of the B - A differences",
        Test::Bootstrap => "difference of medians",
    };
    let mut out = String::new();
    if let Some(e) = &c.effect {
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:+.1}%"));
        let interval = match (e.rel_low_pct, e.rel_high_pct) {
            (Some(_), Some(_)) => format!(
                " [{}, {}] ({:.0}% interval)",
                pct(e.rel_low_pct),
                pct(e.rel_high_pct),
                e.level * 100.0
            ),
            _ => " (too few rounds for an interval)".into(),
        };
        let raw = match e.diff {
            d if d > 0.0 => format!("B's {} {} higher", m.title(), m.show(d)),
            d if d < 0.0 => format!("B's {} {} lower", m.title(), m.show(-d)),
            _ => format!("no difference in {}", m.title()),
        };
        out.push_str(&format!(
            "  {:<20}{}{interval}, positive: B better; {raw} ({what})\n",
            "effect",
            pct(e.rel_pct)
        ));
    }
    let stat = match (c.test, c.statistic, c.p, &c.welch) {
        (Test::MannWhitney, Some(u), Some(p), _) => format!("U = {u}, p = {}", fmt_p(p)),
        (Test::Bootstrap, Some(_), Some(p), _) => {
            format!("p = {} (10,000 resamples)", fmt_p(p))
        }
        (Test::Welch, _, _, Some(w)) => {
            format!("t = {:.3}, df = {:.1}, p = {}", w.t, w.df, fmt_p(w.p))
        }
        _ => "no p: too few rounds".into(),
    };
    out.push_str(&format!("  {:<20}{}, {stat}\n", "test", c.test.title()));
    out
}

/// The runs before round 0, and each side's figure in them, which no verdict weighs.
fn warmup_line(r: &CompareReport) -> String {
    let w = &r.warmup;
    let m = r.comparison.metric;
    if w.a.is_empty() && w.b.is_empty() {
        return format!(
            "  {:<20}none (--warmup-rounds 0): round 0 paid for both sides' cold start\n",
            "warm-up"
        );
    }
    let figures = |runs: &[qbench_core::RunReport]| {
        let v: Vec<String> = runs
            .iter()
            .map(|run| m.of(run).map_or("-".into(), |v| m.show(v)))
            .collect();
        v.join(", ")
    };
    format!(
        "  {:<20}{} run(s) a side before round 0 ({} first), not judged: {} A {}, B {}\n",
        "warm-up",
        w.a.len().max(w.b.len()),
        w.first.join(", ").to_uppercase(),
        m.title(),
        figures(&w.a),
        figures(&w.b)
    )
}

/// With `--rounds auto`, why the rounds stopped where they did; else empty.
fn rounds_line(r: &CompareReport) -> String {
    let Some(auto) = &r.auto_rounds else {
        return String::new();
    };
    let how = match auto.stopped {
        Some(Stopped::Settled) => format!(
            "stopped after {}: the interval is within \u{b1}{}%",
            r.rounds, auto.rule.precision_pct
        ),
        Some(Stopped::MaxRounds) => format!(
            "ran the maximum, {}: the interval is still wider than \u{b1}{}%",
            r.rounds, auto.rule.precision_pct
        ),
        None => format!("{} so far", r.rounds),
    };
    format!("  {:<20}auto, {how}\n", "rounds")
}
/// Steal time and load over the rounds' runs, the noisy ones and why, and the rounds dropped.
fn noise_line(r: &CompareReport) -> String {
    let runs = r.a.runs.len() + r.b.runs.len();
    let noise: Vec<_> =
        r.a.runs
            .iter()
            .chain(&r.b.runs)
            .filter_map(|run| run.noise.as_ref())
            .collect();
    if noise.is_empty() {
        return String::new();
    }
    let max_steal = noise.iter().map(|n| n.steal_pct).fold(0.0, f64::max);
    let median = |v: Vec<f64>| Stats::of(&v).median.unwrap_or(0.0);
    let busy = median(noise.iter().map(|n| n.busy_pct).collect());
    let noisy: Vec<_> = noise.iter().filter(|n| n.noisy).collect();
    let mut line = format!(
        "  {:<20}steal at most {max_steal:.1}%, machine busy {busy:.0}% (median",
        "noise"
    );
    let others: Vec<f64> = noise.iter().filter_map(|n| n.busy_others_pct).collect();
    if !others.is_empty() {
        line.push_str(&format!(", {:.0}% other work", median(others)));
    }
    line.push_str(&format!("); {} of {runs} runs noisy", noisy.len()));
    let unmeasured = runs - noise.len();
    if unmeasured > 0 {
        line.push_str(&format!(
            " ({unmeasured} too short to measure: under one clock tick)"
        ));
    }
    let steal = noisy
        .iter()
        .filter(|n| n.causes.iter().any(|c| matches!(c, NoiseCause::Steal(_))))
        .count();
    let busy_others = noisy
        .iter()
        .filter(|n| {
            n.causes
                .iter()
                .any(|c| matches!(c, NoiseCause::BusyOthers(_)))
        })
        .count();
    if !noisy.is_empty() {
        line.push_str(&format!(
            " ({steal} for steal time, {busy_others} for other work on the machine)"
        ));
    }
    if !r.discarded.is_empty() {
        let why: Vec<String> = r
            .discarded
            .iter()
            .map(|d| {
                if d.causes.is_empty() {
                    format!("{:.0}% steal", d.steal_pct)
                } else {
                    let c: Vec<String> = d.causes.iter().map(ToString::to_string).collect();
                    c.join(" and ")
                }
            })
            .collect();
        line.push_str(&format!(
            "; {} round(s) dropped and run again ({})",
            r.discarded.len(),
            why.join("; ")
        ));
    }
    line + "\n"
}

/// Median per round of the losses each side's sender declared and the link dropped, when
/// both are known (telemetry and a link).
fn losses_line(r: &CompareReport) -> String {
    let side = |rep: &Report| {
        let l: Vec<Losses> = rep.runs.iter().filter_map(Losses::of).collect();
        super::losses::describe(&l)
    };
    match (side(&r.a), side(&r.b)) {
        (Some(a), Some(b)) => format!(
            "  {:<20}median per round; A: {a}\n  {:<20}B: {b}\n",
            "losses", ""
        ),
        _ => String::new(),
    }
}

/// Which side is better, by the metric's direction, and whether the test found it significant.
fn verdict_line(r: &CompareReport) -> String {
    let c = &r.comparison;
    let m = c.metric;
    let better = if m.higher_is_better() {
        "higher"
    } else {
        "lower"
    };
    let test = c.test.name();
    let verdict = match c.verdict {
        Verdict::AFaster => format!(
            "A ({}) is better ({} {better}), significant at p < 0.01 ({test})",
            r.label_a,
            m.title()
        ),
        Verdict::BFaster => format!(
            "B ({}) is better ({} {better}), significant at p < 0.01 ({test})",
            r.label_b,
            m.title()
        ),
        Verdict::Inconclusive => match &c.undecided {
            Some(why) => format!("inconclusive: {}", why.explain(c.test)),
            None => format!("inconclusive (not significant at p < 0.01, {test})"),
        },
    };
    format!("  {:<20}{verdict}\n", "verdict")
}

/// Each side's client CPU and proxy, then a note or warning for each side whose client was
/// limited: a limit of the client, not of the server, may be what was measured.
fn side_notes(r: &CompareReport) -> String {
    let mut out = String::new();
    for (side, rep) in [("A", &r.a), ("B", &r.b)] {
        if let Some(cpu) = super::notes::client_cpu(&rep.runs) {
            out.push_str(&format!("  {:<20}{side}: {cpu}\n", "client cpu"));
        }
        if let Some(cpu) = super::notes::server_cpu(&rep.runs) {
            out.push_str(&format!("  {:<20}{side}: {cpu}\n", "server cpu"));
        }
        if let Some(p) = super::notes::proxy(&rep.runs) {
            out.push_str(&format!("  {:<20}{side}: {p}\n", "proxy"));
        }
        if let Some(p) = super::notes::server_program(&rep.runs) {
            out.push_str(&format!("  {:<20}{side}: {p}\n", "server"));
        }
    }
    for (side, rep) in [("A", &r.a), ("B", &r.b)] {
        if let Some(w) = super::run::goodput_warning(rep) {
            out.push_str(&format!("  WARNING: {side}'s {w}\n"));
        }
    }
    for (side, rep) in [("A", &r.a), ("B", &r.b)] {
        let short: Vec<_> = rep
            .runs
            .iter()
            .filter_map(|run| run.link_check.as_ref()?.why())
            .collect();
        if let Some(first) = short.first() {
            out.push_str(&format!(
                "  WARNING: the link could not carry {} of {side}'s {} runs ({first}): the link, not the transport, shaped them\n",
                short.len(),
                rep.runs.len()
            ));
        }
    }
    for (side, rep) in [("A", &r.a), ("B", &r.b)] {
        if let Some(why) = saturated(rep) {
            out.push_str(&match rep.runs.iter().any(qbench_core::RunReport::cpu_limited) {
                true => format!(
                    "  note: {side}'s client was held to its --client-cpu quota in {why}, as asked\n"
                ),
                false => format!(
                    "  WARNING: the client was saturated in {side}'s {why}: a client limit, not a server result\n"
                ),
            });
        }
    }
    out
}

/// `n runs (first reason)` when the client limited any run of a side.
fn saturated(rep: &Report) -> Option<String> {
    let why: Vec<&String> = rep
        .runs
        .iter()
        // Without a completed request there is no load to have been limited.
        .filter(|run| run.objects.completed > 0)
        .filter_map(|run| run.client.as_ref()?.saturated.as_ref())
        .collect();
    let first = why.first()?;
    Some(format!(
        "{} of {} runs ({first})",
        why.len(),
        rep.runs.len()
    ))
}
