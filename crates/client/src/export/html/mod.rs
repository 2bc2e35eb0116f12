//! The page of `qbench report`: a sweep's cells as heatmaps of the deciding test's effect in
//! each cell's metric, PLT by default (IMC'17 Figures 6-8 and 15: red = QUIC better, blue =
//! TCP better, or B and A when the sides are not one of each; white = not significant), line charts of how each side scales with connections or
//! threads, a table of every cell, and the environment and commands, as one HTML page plus SVG
//! files.

pub(super) mod cell;
mod cell_table;
pub mod compare;
mod env;
mod heatmap;
#[cfg(test)]
mod heatmap_tests;
mod page;
mod qoe;
pub mod run;
#[cfg(test)]
mod run_tests;
mod scaling;
#[cfg(test)]
pub(super) mod scaling_tests;
mod sides;
mod tables;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use qbench_core::report::ccstate::StateMachine;
use qbench_core::report::compare::CompareReport;
use qbench_core::report::compete::CompeteReport;
use qbench_core::scenario::Cell;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::stats::noise::Losses;
use qbench_core::{Report, Stats};

use crate::export::escape;
use crate::export::svg::state_graph;
use cell::{anchors, by_axes, title, varying, varying_axes, Cmp};
use cell_table::{cell_table, competitions_table};
use env::environment_and_commands;
use heatmap::{heatmap, squares};
use page::{head, END};
use sides::{first_round_cwnd, inferred_machines, latency_cdf, per_round, Side};

/// The cell files of a sweep's output directory, as the page shows them.
pub struct Sweep {
    /// From the first cell file read; empty if it has none.
    pub scenario: String,
    pub comparisons: Vec<(Cell, CompareReport)>,
    /// With false discovery rate control: per comparison, in order, its q-value and whether it
    /// is kept (`None` for one without a p-value).
    pub fdr: Option<Vec<Option<(f64, bool)>>>,
    pub competitions: Vec<(Cell, CompeteReport)>,
}

/// The page, and each heatmap and scaling chart it draws, also to be written beside it as
/// SVG files for use outside the page.
pub struct Page {
    pub html: String,
    pub heatmaps: Vec<String>,
    /// Goodput and client CPU per GB against `connections` or `threads`, when a sweep varies
    /// them.
    pub charts: Vec<String>,
}

/// Heatmap axes and the comparison cells grouped by every other varying axis, one heatmap per
/// group. `y` is empty when only one axis varies.
struct Layout<'a> {
    x: String,
    y: String,
    groups: BTreeMap<String, Vec<&'a Cmp>>,
}

/// Both sides of a comparison with their labels, A first.
fn sides(r: &CompareReport) -> [(&String, &Report); 2] {
    [(&r.label_a, &r.a), (&r.label_b, &r.b)]
}

/// Per side, the median over rounds of the losses the senders declared, the packets the link
/// dropped (qdiscs, loss rules, forwarders), and the difference: reordering taken for loss
/// (IMC'17 Figure 10), or drops outside the link (socket buffers).
fn losses_table(r: &CompareReport) -> String {
    let rows: Vec<String> = sides(r)
        .into_iter()
        .filter_map(|(label, rep)| {
            let l: Vec<Losses> = rep.runs.iter().filter_map(Losses::of).collect();
            let med = |f: &dyn Fn(&Losses) -> u64| {
                Stats::of(&l.iter().map(|x| f(x) as f64).collect::<Vec<_>>()).median
            };
            let (d, k, s) = (
                med(&|x| x.declared)?,
                med(&|x| x.dropped)?,
                med(&|x| x.spurious())?,
            );
            Some(format!(
                "<tr><td>{}</td><td>{d:.0}</td><td>{k:.0}</td><td>{s:.0}</td></tr>",
                escape::html(label)
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!("<div class=\"scroll\"><table><tr><th>side</th><th>declared lost (median per round)</th><th>dropped by the link</th><th>not dropped by the link (reordered or late, or dropped elsewhere)</th></tr>{}</table></div>", rows.concat())
}

/// Share of time per state and side; `-` where a side has no telemetry to infer from.
fn state_share_table(machines: &[(&str, Option<StateMachine>)]) -> anyhow::Result<String> {
    let states = [
        "Init",
        "SlowStart",
        "CongestionAvoidance",
        "CaMaxed",
        "ApplicationLimited",
        "Recovery",
        "RetransmissionTimeout",
    ];
    let mut html = String::from("<div class=\"scroll\"><table><tr><th>side</th>");
    for st in states {
        let _ = write!(html, "<th>{st}</th>");
    }
    html.push_str("</tr>");
    for (label, m) in machines {
        let fr = match m {
            Some(m) => serde_json::to_value(&m.time_fraction)?,
            None => serde_json::Value::Null,
        };
        let _ = write!(html, "<tr><td>{}</td>", escape::html(label));
        for st in states {
            let v = fr.get(st).and_then(|v| v.as_f64());
            let _ = write!(
                html,
                "<td>{}</td>",
                v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
            );
        }
        html.push_str("</tr>");
    }
    html.push_str("</table></div>");
    Ok(html)
}

/// Object-latency CDFs of both sides, their first round's cwnd, and the inferred state shares,
/// under a heading with the id the cell table links to.
fn cell_details(id: &str, c: &Cmp) -> anyhow::Result<String> {
    let r = &c.report;
    let name = title(&c.cell);
    let mut html = format!(
        "<h3 id=\"{}\">{}</h3><div class=\"charts\">",
        escape::html(id),
        escape::html(&name)
    );
    let both: [Side<'_>; 2] = sides(r).map(|(l, rep)| (l.as_str(), rep));
    html.push_str(&per_round(&name, r.comparison.metric, &both));
    html.extend(latency_cdf(&name, &both)?);
    html.extend(first_round_cwnd(&name, &both));
    let machines = inferred_machines(&both);
    for (label, m) in &machines {
        if let Some(m) = m {
            html.push_str(&state_graph(
                &format!("{label}: inferred states, {name}"),
                m,
            ));
        }
    }
    html.push_str("</div>");
    html.push_str(&losses_table(r));
    for (label, rep) in sides(r) {
        if let Some(cpu) = crate::export::text::notes::client_cpu(&rep.runs) {
            let _ = write!(
                html,
                "<p>client CPU of {}: {}</p>",
                escape::html(label),
                escape::html(&cpu)
            );
        }
        if let Some(p) = crate::export::text::notes::proxy(&rep.runs) {
            let _ = write!(
                html,
                "<p>proxy of {}: {}</p>",
                escape::html(label),
                escape::html(&p)
            );
        }
    }
    html.push_str(&state_share_table(&machines)?);
    Ok(html)
}

fn heatmap_layout(cells: &[Cmp]) -> Layout<'_> {
    let keys = varying_axes(cells);
    let (x, y) = match keys.as_slice() {
        [a, b, ..] => (a.clone(), b.clone()),
        [a] => (a.clone(), String::new()),
        [] => (String::new(), String::new()),
    };
    let mut groups: BTreeMap<String, Vec<&Cmp>> = BTreeMap::new();
    for c in cells {
        let key = keys
            .iter()
            .skip(2)
            .map(|k| format!("{k}={}", c.cell.params.get(k).cloned().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(" ");
        groups.entry(key).or_default().push(c);
    }
    Layout { x, y, groups }
}

/// The metrics the comparison cells are judged by, as a table heads them.
fn metric_titles(cells: &[Cmp]) -> String {
    let mut seen: Vec<Metric> = Vec::new();
    for c in cells {
        if !seen.contains(&c.report.comparison.metric) {
            seen.push(c.report.comparison.metric);
        }
    }
    let titles: Vec<&str> = seen.iter().map(|m| m.title()).collect();
    match titles.as_slice() {
        [] => Metric::Plt.title().into(),
        t => t.join(", "),
    }
}

/// The tests the comparison cells are judged by, each with what its effect estimates.
fn test_effects(cells: &[Cmp]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for c in cells {
        let t = match c.report.comparison.test {
            Test::MannWhitney => "Mann-Whitney U: Hodges-Lehmann shift",
            Test::Welch => "Welch's t-test: difference of means",
            Test::Bootstrap => "bootstrap: difference of medians",
        };
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    seen.join("; ")
}

/// Marks a page as `qbench report`'s own, so that a later report may replace it.
pub const GENERATOR: &str = "qbench report";

fn page_head(name: &str, cells: &[Cmp]) -> String {
    let mut html = head(name, GENERATOR);
    let (red, blue) = heatmap::key(cells);
    let _ = writeln!(html, "<h1>qbench sweep: {}</h1><p>{} cells. Each square is the effect in {} of the test that decided its verdict ({}), in percent; <span style=\"color:#c00\">red: {}</span>, <span style=\"color:#00c\">blue: {}</span>, white: not significant (p &ge; 0.01{}). Hover over a square for the effect's interval, p and q.</p>", escape::html(name), cells.len(), escape::html(&metric_titles(cells)), escape::html(&test_effects(cells)), escape::html(&red), escape::html(&blue), if cells.iter().any(|c| c.fdr.is_some()) { ", or not kept by false discovery rate control: <em>n.s. (FDR)</em>" } else { "" });
    html
}

/// One heatmap per group of the layout.
fn heatmaps(name: &str, layout: &Layout<'_>) -> Vec<String> {
    let y = (!layout.y.is_empty()).then_some(layout.y.as_str());
    let mut svgs = Vec::new();
    for (group, members) in &layout.groups {
        let metric = members
            .first()
            .map_or(Metric::Plt, |c| c.report.comparison.metric);
        let title = if group.is_empty() {
            format!("{name} ({})", metric.title())
        } else {
            format!("{name} ({}): {group}", metric.title())
        };
        svgs.push(heatmap(
            &title,
            &layout.x,
            y,
            &squares(members, &layout.x, y),
        ));
    }
    svgs
}

/// The comparisons as the page's parts draw them, each with its q-value if there is one, in
/// the order of their axis values (files are read in whatever order the directory lists
/// them).
fn cells(
    comparisons: Vec<(Cell, CompareReport)>,
    fdr: Option<Vec<Option<(f64, bool)>>>,
) -> Vec<Cmp> {
    let fdr = fdr.unwrap_or_default();
    let mut cells: Vec<Cmp> = comparisons
        .into_iter()
        .enumerate()
        .map(|(i, (cell, report))| Cmp {
            cell,
            report,
            fdr: fdr.get(i).copied().flatten(),
        })
        .collect();
    let axes = varying_axes(&cells);
    cells.sort_by(|a, b| by_axes(&a.cell, &b.cell, &axes));
    cells
}

/// A cell whose recorded latency histogram cannot be decoded fails the page.
pub fn page(sweep: Sweep) -> anyhow::Result<Page> {
    let cells = cells(sweep.comparisons, sweep.fdr);
    let mut competitions = sweep.competitions;
    let axes = varying(competitions.iter().map(|(c, _)| &c.params));
    competitions.sort_by(|a, b| by_axes(&a.0, &b.0, &axes));
    let ids = anchors(cells.iter().map(|c| &c.cell));
    let layout = heatmap_layout(&cells);
    let heatmaps = heatmaps(&sweep.scenario, &layout);
    let charts = scaling::charts(&sweep.scenario, &cells);
    let mut html = page_head(&sweep.scenario, &cells);
    for svg in &heatmaps {
        let _ = write!(html, "<div class=\"scroll\">{svg}</div>");
    }
    html.push_str(&scaling::section(&charts));
    html.push_str(&cell_table(&cells, &ids));
    html.push_str(&qoe::table(&cells));
    html.push_str("<h2 id=\"per-cell\">Per cell</h2>");
    for (id, c) in ids.iter().zip(&cells) {
        html.push_str(&cell_details(id, c)?);
    }
    html.push_str(&competitions_table(&competitions));
    html.push_str(&environment_and_commands(&cells, &competitions)?);
    html.push_str(END);
    Ok(Page {
        html,
        heatmaps,
        charts,
    })
}

#[cfg(test)]
mod tests;
