//! `qbench diff` for people (text), for pull requests (Markdown) and for spreadsheets (CSV).

use qbench_core::report::compare::{Comparison, Verdict, ALPHA};
use qbench_core::report::diff::{Better, DiffReport, SummaryDelta};
use qbench_core::stats::fmt_p;

/// A figure in its unit, for a reader.
fn shown(v: Option<f64>, unit: &str) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    match unit {
        "us" => qbench_core::report::thresholds::shown(v, unit),
        "bit/s" => format!("{:.2} Mbit/s", v / 1e6),
        "objects/s" => format!("{v:.1}/s"),
        _ => super::numbers::count(v.round() as u64),
    }
}

/// `+20.1%`, with whether that is better or worse for this figure.
fn change(r: &SummaryDelta) -> String {
    let Some(d) = r.delta else {
        return "-".into();
    };
    if d == 0.0 {
        return "same".into();
    }
    let how = match (r.better, d) {
        (Better::Lower, d) if d < 0.0 => " better",
        (Better::Higher, d) if d > 0.0 => " better",
        (Better::Neither, _) => "",
        _ => " worse",
    };
    match r.delta_pct {
        Some(p) => format!("{p:+.1}%{how}"),
        None => format!("{d:+}{how}"),
    }
}

/// What a verdict says, NEW against OLD: by how much better or worse, with the interval of
/// that amount, in percent of OLD.
fn verdict(c: &Comparison) -> String {
    let p = c.p.map_or("no p".into(), |p| format!("p {}", fmt_p(p)));
    // The effect is positive when NEW is better; a worse NEW is said with positive amounts.
    let sign = if c.verdict == Verdict::AFaster {
        -1.0
    } else {
        1.0
    };
    let amount = c.effect.as_ref().and_then(|e| {
        let pct = e.rel_pct? * sign;
        let interval = match (e.rel_low_pct, e.rel_high_pct) {
            (Some(l), Some(h)) => {
                let (l, h) = if sign < 0.0 { (-h, -l) } else { (l, h) };
                format!(" [{l:.1}%, {h:.1}%]")
            }
            _ => String::new(),
        };
        Some(format!("{pct:.1}%{interval}"))
    });
    let amount = amount.unwrap_or_else(|| "-".into());
    match c.verdict {
        Verdict::BFaster => format!("NEW better by {amount}, {p}"),
        Verdict::AFaster => format!("NEW worse by {amount}, {p}"),
        Verdict::Inconclusive => {
            let why = c.undecided.as_ref().map_or(String::new(), |u| u.short());
            format!("no significant change ({why})")
        }
    }
}

fn rows(d: &DiffReport) -> Vec<[String; 4]> {
    d.summary
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                shown(r.old, &r.unit),
                shown(r.new, &r.unit),
                change(r),
            ]
        })
        .collect()
}

fn side(name: &str, runs: usize, complete: bool) -> String {
    let incomplete = if complete { "" } else { ", INCOMPLETE" };
    format!("{name} ({runs} run(s){incomplete})")
}

pub fn text(d: &DiffReport) -> String {
    let mut out = format!(
        "qbench diff: OLD {} -> NEW {}\n",
        side(&d.old, d.old_runs, d.old_complete),
        side(&d.new, d.new_runs, d.new_complete)
    );
    for c in &d.config_changes {
        out.push_str(&format!("  config          {c}\n"));
    }
    out.push_str(&format!("  {:<20}{:>16}{:>16}  change\n", "", "OLD", "NEW"));
    for [name, old, new, change] in rows(d) {
        out.push_str(&format!("  {name:<20}{old:>16}{new:>16}  {change}\n"));
    }
    if let Some(test) = d.verdicts.first().map(|c| c.test) {
        out.push_str(&format!(
            "  per-run figures, judged by {} at p < {ALPHA} (NEW against OLD; the interval is the change's 95% interval):\n",
            test.title()
        ));
    }
    for c in &d.verdicts {
        out.push_str(&format!("    {:<18}{}\n", c.metric.title(), verdict(c)));
    }
    out
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `s` as one Markdown code span, whatever it holds: fenced by one backtick more than its
/// longest run of them (a backtick inside ends no span), padded with a space when it starts or
/// ends with one, line breaks as spaces (a blank line would end the paragraph).
fn code(s: &str) -> String {
    let s = cell(&s.replace(['\r', '\n'], " "));
    let longest = s
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

pub fn markdown(d: &DiffReport) -> String {
    let mut out = format!(
        "**qbench diff**: OLD {} ({} runs) → NEW {} ({} runs)\n\n",
        code(&d.old),
        d.old_runs,
        code(&d.new),
        d.new_runs
    );
    if !d.config_changes.is_empty() {
        out.push_str("Configuration changes:\n\n");
        for c in &d.config_changes {
            out.push_str(&format!("- {}\n", code(c)));
        }
        out.push('\n');
    }
    out.push_str("| figure | OLD | NEW | change |\n|---|---:|---:|---|\n");
    for [name, old, new, change] in rows(d) {
        out.push_str(&format!("| {} | {old} | {new} | {change} |\n", cell(&name)));
    }
    if !d.verdicts.is_empty() {
        out.push_str("\n| per-run figure | verdict |\n|---|---|\n");
        for c in &d.verdicts {
            out.push_str(&format!(
                "| {} | {} |\n",
                c.metric.title(),
                cell(&verdict(c))
            ));
        }
    }
    out
}

/// Quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per summary figure with raw numbers, then one per verdict (its medians, and the
/// effect in percent, positive when NEW is better).
pub fn csv(d: &DiffReport) -> String {
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    let mut out = String::from("kind,figure,unit,old,new,delta,delta_pct,better_pct,verdict,p\n");
    for r in &d.summary {
        out.push_str(&format!(
            "summary,{},{},{},{},{},{},,,\n",
            csv_field(&r.name),
            r.unit,
            num(r.old),
            num(r.new),
            num(r.delta),
            num(r.delta_pct)
        ));
    }
    for c in &d.verdicts {
        let verdict = match c.verdict {
            Verdict::BFaster => "new_better",
            Verdict::AFaster => "new_worse",
            Verdict::Inconclusive => "inconclusive",
        };
        let delta = c.a.median.zip(c.b.median).map(|(a, b)| b - a);
        let delta_pct =
            c.a.median
                .zip(delta)
                .filter(|(a, _)| *a != 0.0)
                .map(|(a, d)| d / a * 100.0);
        out.push_str(&format!(
            "verdict,{},{},{},{},{},{},{},{verdict},{}\n",
            c.metric.name(),
            c.metric.unit(),
            num(c.a.median),
            num(c.b.median),
            num(delta),
            num(delta_pct),
            num(c.effect.as_ref().and_then(|e| e.rel_pct)),
            num(c.p)
        ));
    }
    out
}
