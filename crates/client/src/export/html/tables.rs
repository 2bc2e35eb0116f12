//! Tables of one or more run reports side by side, for the run and compare pages: what each
//! side fetched and how fast, its errors, the `--fail-if` conditions, and the machine and
//! command line it ran with.

use std::fmt::Write as _;

use qbench_core::report::thresholds::ThresholdOutcome;
use qbench_core::report::Environment;
use qbench_core::{PercentileSummary, Report};

use super::env::environment_table;
use super::sides::Side;
use crate::export::escape;

/// Microseconds as milliseconds with two decimals, `-` when absent.
pub(super) fn ms(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| format!("{:.2}", v / 1000.0))
}

fn pct(s: &PercentileSummary, f: fn(&PercentileSummary) -> Option<u64>) -> String {
    // A histogram of nothing has no percentiles, whatever its fields hold.
    ms(f(s).filter(|_| s.count > 0).map(|v| v as f64))
}

type Figure = fn(&Report) -> String;

/// A row of the summary: the figure's key, its label, and the figure of a side.
struct Row {
    key: String,
    label: String,
    value: Box<dyn Fn(&Report) -> String>,
}

type Pick = fn(&Report) -> &PercentileSummary;

/// The rows of the summary, in order.
fn rows() -> Vec<Row> {
    let fixed: [(&str, &str, Figure); 6] = [
        ("runs", "runs complete", |r| {
            format!("{} of {}", r.summary.complete_runs, r.summary.runs)
        }),
        ("completed", "objects completed", |r| {
            r.summary.objects_completed.to_string()
        }),
        ("failed", "objects failed", |r| {
            let n: u64 = r.runs.iter().map(|x| x.objects.failed).sum();
            n.to_string()
        }),
        ("not_started", "objects not started", |r| {
            let n: u64 = r.runs.iter().map(|x| x.objects.not_started).sum();
            n.to_string()
        }),
        ("errors", "errors", |r| r.summary.errors.total().to_string()),
        ("errors_by_kind", "errors by kind", |r| {
            r.summary.errors.to_string()
        }),
    ];
    type Of = fn(&PercentileSummary) -> Option<u64>;
    let percentiles: [(&str, &str, Of); 5] = [
        ("p50", "p50", |s| s.p50_us),
        ("p90", "p90", |s| s.p90_us),
        ("p99", "p99", |s| s.p99_us),
        ("p999", "p99.9", |s| s.p999_us),
        ("max", "max", |s| s.max_us),
    ];
    let histograms: [(&str, &str, Pick, &[&str]); 2] = [
        (
            "latency",
            "object latency",
            |r| &r.summary.object_latency.summary,
            &["p50", "p90", "p99", "p999", "max"],
        ),
        ("ttfb", "TTFB", |r| &r.summary.ttfb.summary, &["p50", "p99"]),
    ];
    let medians: [(&str, &str, Figure); 4] = [
        ("plt", "PLT, median over runs (ms)", |r| {
            ms(r.summary.plt_us.median)
        }),
        ("handshake", "handshake, median over runs (ms)", |r| {
            ms(r.summary.handshake_us.median)
        }),
        ("goodput", "goodput, median over runs (Mbit/s)", |r| {
            let v = r.summary.goodput_bps.median;
            let shown = v.map_or("-".into(), |v| format!("{:.2}", v / 1e6));
            match crate::export::text::run::goodput_warning(r) {
                Some(w) => format!("{shown} (WARNING: {w})"),
                None => shown,
            }
        }),
        ("rate", "objects/s, median over runs", |r| {
            let v = r.summary.objects_per_s.median;
            v.map_or("-".into(), |v| format!("{v:.1}"))
        }),
    ];
    let boxed = |(key, label, f): (&str, &str, Figure)| Row {
        key: key.into(),
        label: label.into(),
        value: Box::new(f),
    };
    let mut all: Vec<Row> = fixed.into_iter().map(boxed).collect();
    for (key, name, of, which) in histograms {
        for &(p, title, f) in percentiles.iter().filter(|(p, ..)| which.contains(p)) {
            all.push(Row {
                key: format!("{key}_{p}"),
                label: format!("{name} {title} (ms)"),
                value: Box::new(move |r: &Report| pct(of(r), f)),
            });
        }
    }
    all.extend(medians.into_iter().map(boxed));
    all
}

/// One row per figure, one column per side. Each row carries its figure's key, so that a
/// reader's script (or a test) finds a figure without parsing its label.
pub(super) fn summary_table(sides: &[Side<'_>]) -> String {
    let mut html =
        String::from("<div class=\"scroll\"><table id=\"summary\"><tr><th class=\"w\">figure</th>");
    for (label, _) in sides {
        let _ = write!(html, "<th>{}</th>", escape::html(label));
    }
    html.push_str("</tr>");
    for row in rows() {
        let _ = write!(
            html,
            "<tr data-key=\"{}\"><td class=\"k\">{}</td>",
            row.key,
            escape::html(&row.label)
        );
        for (_, rep) in sides {
            let _ = write!(html, "<td>{}</td>", escape::html(&(row.value)(rep)));
        }
        html.push_str("</tr>");
    }
    html.push_str("</table></div>");
    html
}

/// Errors by kind per side, each side's first error, and why a report is incomplete.
pub(super) fn errors_section(sides: &[Side<'_>]) -> String {
    let mut html = String::from("<h2 id=\"errors\">Errors</h2>");
    let mut any = false;
    for (label, rep) in sides {
        let first = rep.runs.iter().find_map(|r| r.first_error.as_ref());
        let errors = &rep.summary.errors;
        if errors.is_empty() && first.is_none() && rep.aborted.is_none() {
            continue;
        }
        any = true;
        let _ = write!(html, "<h3>{}</h3>", escape::html(label));
        if let Some(why) = &rep.aborted {
            let _ = write!(
                html,
                "<p class=\"bad\">incomplete: {}</p>",
                escape::html(why)
            );
        }
        if !errors.is_empty() {
            html.push_str("<div class=\"scroll\"><table class=\"errors\"><tr><th class=\"w\">kind</th><th>count</th></tr>");
            for (kind, n) in &errors.0 {
                let _ = write!(
                    html,
                    "<tr><td class=\"k\">{}</td><td>{n}</td></tr>",
                    escape::html(&kind.to_string())
                );
            }
            html.push_str("</table></div>");
        }
        if let Some(first) = first {
            let _ = write!(
                html,
                "<p>first error: <code class=\"first-error\">{}</code></p>",
                escape::html(first)
            );
        }
    }
    if !any {
        html.push_str("<p>No errors.</p>");
    }
    html
}

/// A threshold's figure as people read it: whole numbers whole, others to three decimals
/// (an observed share carries float noise in its last digits).
fn figure(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The `--fail-if` conditions with what the report held for each; empty without any.
pub(super) fn thresholds_section(outcomes: &[ThresholdOutcome]) -> String {
    if outcomes.is_empty() {
        return String::new();
    }
    let failed = outcomes.iter().filter(|o| o.failed).count();
    let mut html = format!(
        "<h2 id=\"thresholds\">Thresholds (--fail-if)</h2><p>{}</p><div class=\"scroll\"><table><tr><th class=\"w\">condition</th><th>observed</th><th>limit</th><th class=\"w\">outcome</th></tr>",
        if failed == 0 {
            "No condition was met: the command passed.".to_string()
        } else {
            format!("<span class=\"bad\">{failed} of {} conditions met: the command failed (exit status 3).</span>", outcomes.len())
        }
    );
    for o in outcomes {
        let observed = o.observed.map_or("none (cannot be checked)".into(), |v| {
            format!("{} {}", figure(v), o.unit)
        });
        let outcome = if o.failed {
            "<td class=\"w bad\">met: fails the command</td>"
        } else {
            "<td class=\"w\">not met: passes</td>"
        };
        let _ = write!(
            html,
            "<tr><td class=\"k\"><code>{}</code></td><td>{}</td><td>{} {} {}</td>{outcome}</tr>",
            escape::html(&o.condition),
            escape::html(&observed),
            escape::html(&o.op),
            figure(o.limit),
            escape::html(&o.unit)
        );
    }
    html.push_str("</table></div>");
    html
}

/// The machine's warnings first, where they cannot be missed, then the whole environment
/// and the command line.
/// A second environment (a comparison's side B, when it differs from A's) follows under its
/// own heading.
pub(super) fn environment_section(
    env: &Environment,
    other: Option<(&str, &Environment)>,
    command: &[String],
) -> anyhow::Result<String> {
    let mut html = String::from("<h2 id=\"environment\">Environment</h2>");
    if !env.warnings.is_empty() {
        html.push_str("<ul class=\"warnings\">");
        for w in &env.warnings {
            let _ = write!(html, "<li class=\"bad\">{}</li>", escape::html(w));
        }
        html.push_str("</ul>");
    }
    html.push_str(&environment_table(&serde_json::to_value(env)?));
    if let Some((label, other)) = other {
        let _ = write!(html, "<h3>{}</h3>", escape::html(label));
        html.push_str(&environment_table(&serde_json::to_value(other)?));
    }
    let _ = write!(
        html,
        "<h2 id=\"command\">Command</h2><p><code>{}</code></p>",
        escape::html(&command.join(" "))
    );
    Ok(html)
}
