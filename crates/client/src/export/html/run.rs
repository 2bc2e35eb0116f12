//! The page of `qbench --html`: one benchmark's report as a summary table, its latency over
//! time, CDFs, cwnd and inferred states, errors, `--fail-if` outcomes, environment and
//! command line, with inline SVG and no script, so that it opens offline.

use std::fmt::Write as _;

use qbench_core::Report;

use super::page::{head, END};
use super::sides::{
    first_round_cwnd, inferred_machines, latency_cdf, over_time, per_run_latency, ttfb_cdf, Side,
};
use super::tables::{environment_section, errors_section, summary_table, thresholds_section};
use crate::export::escape;
use crate::export::svg::state_graph;

/// Marks a page as a single benchmark's.
pub const GENERATOR: &str = "qbench --html";

/// What the report is of, in a few words: `h3, 10x50KB, 3 run(s)`.
fn what(r: &Report) -> String {
    let c = &r.config;
    let mut parts = vec![c.spec.proto.to_string()];
    if let Some(o) = &c.spec.objects {
        parts.push(o.to_string());
    }
    if let Some(l) = &c.spec.load {
        parts.push(format!("held {}", humantime::format_duration(l.duration)));
    }
    parts.push(format!("{} run(s)", r.summary.runs));
    parts.join(", ")
}

/// How the report's latency moved in time: interval lines when it has intervals, else one
/// point per run, and a note saying which.
pub(super) fn over_time_section(name: &str, run_word: &str, sides: &[Side<'_>]) -> String {
    let mut html = String::from("<h2 id=\"over-time\">Latency over time</h2>");
    match over_time(name, sides) {
        Some(charts) => {
            html.push_str("<div class=\"charts\">");
            charts.iter().for_each(|c| html.push_str(c));
            html.push_str("</div>");
        }
        None => {
            let _ = write!(
                html,
                "<p class=\"note\" id=\"no-intervals\">No intervals were recorded: they are recorded with --interval (e.g. --duration 30s --interval 1s) or --metrics-listen, which a comparison does not take.{}</p>",
                if sides.iter().any(|(_, r)| r.runs.len() > 1) {
                    format!(" Below, each {run_word}'s latency instead.")
                } else {
                    String::new()
                }
            );
            if let Some(chart) = per_run_latency(name, run_word, sides) {
                let _ = write!(html, "<div class=\"charts\">{chart}</div>");
            }
        }
    }
    html
}

/// Object latency and TTFB CDFs, the first run's cwnd and the inferred state machines.
pub(super) fn distributions_section(name: &str, sides: &[Side<'_>]) -> anyhow::Result<String> {
    let mut html =
        String::from("<h2 id=\"distributions\">Distributions</h2><div class=\"charts\">");
    let mut drawn = 0;
    for chart in [latency_cdf(name, sides)?, ttfb_cdf(name, sides)?]
        .into_iter()
        .flatten()
    {
        html.push_str(&chart);
        drawn += 1;
    }
    html.push_str("</div>");
    if drawn == 0 {
        html.push_str(
            "<p class=\"note\">No object completed: there is no distribution to draw.</p>",
        );
    }
    html.push_str("<h2 id=\"cwnd\">Congestion window</h2>");
    match first_round_cwnd(name, sides) {
        Some(chart) => {
            let _ = write!(html, "<div class=\"charts\">{chart}");
            for (label, m) in inferred_machines(sides) {
                if let Some(m) = m {
                    html.push_str(&state_graph(&format!("{label}: inferred states"), &m));
                }
            }
            html.push_str("</div>");
        }
        None => html.push_str(
            "<p class=\"note\">The server sent no telemetry (a remote server without a telemetry token, --no-telemetry, or --sample-interval 0).</p>",
        ),
    }
    Ok(html)
}

/// The status line: complete, or why not.
pub(super) fn status(complete: bool, aborted: Option<&str>) -> String {
    match (complete, aborted) {
        (true, _) => "<p id=\"status\">Complete.</p>".into(),
        (false, Some(why)) => format!(
            "<p id=\"status\" class=\"bad\">Incomplete: {}. What was measured until then is below.</p>",
            escape::html(why)
        ),
        (false, None) => "<p id=\"status\" class=\"bad\">Incomplete: not every run completed (see Errors).</p>".into(),
    }
}

/// A report whose recorded histograms cannot be decoded fails the page.
pub fn page(r: &Report) -> anyhow::Result<String> {
    let name = what(r);
    let label = r.config.spec.proto.to_string();
    let sides: [Side<'_>; 1] = [(&label, r)];
    let mut html = head(&name, GENERATOR);
    let _ = write!(
        html,
        "<h1>qbench: {}</h1><p>Started {}; {} {}.</p>",
        escape::html(&name),
        escape::html(&r.started_at),
        escape::html(&r.tool.name),
        escape::html(&r.tool.version)
    );
    html.push_str(&status(r.complete, r.aborted.as_deref()));
    html.push_str("<h2 id=\"summary-h\">Summary</h2>");
    html.push_str(&summary_table(&sides));
    html.push_str(&over_time_section(&name, "run", &sides));
    html.push_str(&distributions_section(&name, &sides)?);
    html.push_str(&errors_section(&sides));
    html.push_str(&thresholds_section(&r.thresholds));
    html.push_str(&environment_section(&r.environment, None, &r.command)?);
    html.push_str(END);
    Ok(html)
}
