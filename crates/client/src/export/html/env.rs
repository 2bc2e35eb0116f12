//! The end of `qbench report`'s page: the machine the sweep ran on as a table, and the
//! command line that reruns each cell.

use std::fmt::Write as _;

use qbench_core::report::compete::CompeteReport;
use qbench_core::scenario::{Cell, CellSpec};
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use serde_json::Value;

use super::cell::{title, Cmp};
use crate::export::escape;
use crate::flags::rerun::{compare_command, compete_command};

/// A byte count as the kernel's buffer sizes are usually round in: binary units where exact.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n if n >= 1_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} KB", n as f64 / 1e3),
        n => format!("{n} B"),
    }
}

/// A value with its unit where the key makes it plain: socket buffer sysctls are bytes
/// (`tcp_rmem` is min, default and max), `tcp_mem` and `udp_mem` pages.
fn human(key: &str, value: &str) -> String {
    let numbers: Option<Vec<u64>> = value.split_whitespace().map(|n| n.parse().ok()).collect();
    let numbers = numbers.filter(|n| !n.is_empty());
    let last = key.rsplit('.').next().unwrap_or(key);
    match numbers {
        Some(n) if last.contains("rmem") || last.contains("wmem") => {
            let sizes: Vec<String> = n.iter().map(|&b| bytes(b)).collect();
            if n.len() == 3 {
                format!("{value} ({}: min, default, max)", sizes.join(" / "))
            } else {
                format!("{value} ({})", sizes.join(" / "))
            }
        }
        Some(n) if matches!(last, "tcp_mem" | "udp_mem") && n.len() == 3 => {
            format!("{value} (pages: min, pressure, max)")
        }
        _ => value.to_string(),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        v => v.to_string(),
    }
}

/// `(key, value)` rows of `v`, nested objects' keys joined with dots under `prefix`.
fn flatten(prefix: &str, v: &Value, rows: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, rows);
            }
        }
        v => rows.push((prefix.to_string(), human(prefix, &scalar(v)))),
    }
}

/// The environment as a two-column table: scalar fields first, then each nested object
/// (sysctls, crate versions) under a heading row of its own, its keys within it.
pub(super) fn environment_table(env: &Value) -> String {
    let Value::Object(top) = env else {
        return format!("<p>{}</p>", escape::html(&scalar(env)));
    };
    let row = |k: &str, v: &str| {
        format!(
            "<tr><td class=\"k\">{}</td><td class=\"w\">{}</td></tr>",
            escape::html(k),
            escape::html(v)
        )
    };
    let mut html = String::from("<div class=\"scroll\"><table class=\"env\">");
    for (k, v) in top.iter().filter(|(_, v)| !v.is_object()) {
        html.push_str(&row(k, &human(k, &scalar(v))));
    }
    for (k, v) in top.iter().filter(|(_, v)| v.is_object()) {
        let mut rows = Vec::new();
        flatten("", v, &mut rows);
        if rows.is_empty() {
            continue;
        }
        let _ = write!(
            html,
            "<tr><th colspan=\"2\" class=\"w\">{}</th></tr>",
            escape::html(k)
        );
        for (k, v) in rows {
            html.push_str(&row(&k, &v));
        }
    }
    html.push_str("</table></div>");
    html
}

/// The environment of the first cell (all cells of a sweep share a machine), then the
/// command line that reruns each cell, in the page's order.
pub(super) fn environment_and_commands(
    cells: &[Cmp],
    competitions: &[(Cell, CompeteReport)],
) -> anyhow::Result<String> {
    let env = match (cells.first(), competitions.first()) {
        (Some(c), _) => Some(serde_json::to_value(&c.report.a.environment)?),
        (None, Some((_, c))) => c
            .flows
            .first()
            .map(|f| serde_json::to_value(&f.report.environment))
            .transpose()?,
        _ => None,
    };
    let mut html = String::from("<h2 id=\"environment\">Environment</h2>");
    html.push_str(&env.map_or_else(String::new, |e| environment_table(&e)));
    html.push_str("<h2 id=\"commands\">Commands</h2><ul>");
    let commands = cells
        .iter()
        .map(|c| {
            let command = match &c.cell.spec {
                CellSpec::Compare(s) => {
                    compare_command(s, c.report.comparison.metric, c.report.comparison.test)
                }
                CellSpec::Compete(s) => compete_command(s),
            };
            (&c.cell, command)
        })
        .chain(competitions.iter().map(|(c, _)| {
            let command = match &c.spec {
                CellSpec::Compare(s) => {
                    compare_command(s, Metric::default_for_spec(&s.base), Test::Welch)
                }
                CellSpec::Compete(s) => compete_command(s),
            };
            (c, command)
        }));
    for (cell, command) in commands {
        let _ = writeln!(
            html,
            "<li>{}: <code>{}</code></li>",
            escape::html(&title(cell)),
            escape::html(&command.join(" "))
        );
    }
    html.push_str("</ul>");
    Ok(html)
}
