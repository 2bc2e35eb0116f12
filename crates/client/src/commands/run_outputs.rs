//! What a benchmark writes beside its summary once its report is known: the JSON report, its
//! page, and the charts and histogram drawn from it.

use std::path::Path;

use anyhow::Context;
use qbench_core::report::ccstate::StateMachine;
use qbench_core::report::telemetry::Timeline;
use qbench_core::Report;

use crate::export::{rewritable, write_json, write_text, Dest};
use crate::flags::cli::Outputs;

/// `--html`: the report as a page.
pub(super) fn write_page(path: &Path, report: &Report) -> anyhow::Result<()> {
    crate::export::html::run::page(report)
        .and_then(|html| write_text(path, &html))
        .context("--html")
}

/// Whether `rewrite` writes anything: the report need not be built for it otherwise.
pub(super) fn rewrites(outputs: &Outputs, json: Option<&Dest>) -> bool {
    json.and_then(Dest::rewritable).is_some() || outputs.html.as_deref().is_some_and(rewritable)
}

/// The JSON report and its page again, where each is a file that may be rewritten (a device
/// or FIFO takes one document, the final one): after every run, and once a late signal is
/// written into the report.
pub(super) fn rewrite(
    outputs: &Outputs,
    json: Option<&Dest>,
    report: &Report,
) -> anyhow::Result<()> {
    let json = json
        .and_then(Dest::rewritable)
        .map(|p| Dest::File(p.clone()));
    let page = outputs.html.as_deref().filter(|p| rewritable(p));
    json_and_page(json.as_ref(), page, report)
}

/// The report of a run that ended before it began (a signal, an unreachable peer), as JSON
/// and as a page: no other output has anything to show.
pub(super) fn written(
    outputs: &Outputs,
    json: Option<&Dest>,
    report: &Report,
) -> anyhow::Result<()> {
    json_and_page(json, outputs.html.as_deref(), report)
}

fn json_and_page(json: Option<&Dest>, page: Option<&Path>, report: &Report) -> anyhow::Result<()> {
    if let Some(dest) = json {
        write_json(dest, report)?;
    }
    match page {
        Some(path) => write_page(path, report),
        None => Ok(()),
    }
}

/// `--json`, `--html`, `--state-graph`, `--plot` and `--hgrm`.
/// `cc_title` names the configuration on the charts.
pub(super) fn write_outputs(
    cc_title: &str,
    outputs: &Outputs,
    json: Option<&Dest>,
    report: &Report,
) -> anyhow::Result<()> {
    if let Some(dest) = json {
        write_json(dest, report)?;
    }
    if let Some(path) = &outputs.html {
        write_page(path, report)?;
    }
    write_cc_outputs(cc_title, outputs, report)?;
    if let Some(path) = &outputs.hgrm {
        crate::export::hgrm::latency(report)
            .and_then(|text| write_text(path, &text))
            .context("--hgrm")?;
    }
    Ok(())
}

/// `--state-graph` (all runs' connections) and `--plot` (first run).
fn write_cc_outputs(title: &str, outputs: &Outputs, report: &Report) -> anyhow::Result<()> {
    let timelines: Vec<&Timeline> = report
        .runs
        .iter()
        .flat_map(|r| r.telemetry.iter().flatten())
        .collect();
    if let Some(path) = &outputs.state_graph {
        anyhow::ensure!(
            !timelines.is_empty(),
            "--state-graph: the server sent no telemetry"
        );
        let dot = StateMachine::infer(&timelines).to_dot(title);
        write_text(path, &dot).context("--state-graph")?;
    }
    if let Some(path) = &outputs.plot {
        let first = report.runs.first().and_then(|r| r.telemetry.as_ref());
        let lines: Vec<(String, &Timeline)> = first
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| (format!("{} {} connection {i}", t.transport, t.cc), t))
            .collect();
        anyhow::ensure!(!lines.is_empty(), "--plot: the server sent no telemetry");
        let svg = crate::export::svg::cwnd_chart(&format!("cwnd over time: {title}"), &lines);
        write_text(path, &svg).context("--plot")?;
    }
    Ok(())
}
