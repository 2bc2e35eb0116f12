//! What the HTML report's parts share: one comparison cell as they draw it, the axes that vary
//! between cells, and the order, titles and anchors of cells.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use qbench_core::report::compare::CompareReport;
use qbench_core::scenario::Cell;

/// A comparison cell of a sweep.
pub(in crate::export) struct Cmp {
    pub(in crate::export) cell: Cell,
    pub(in crate::export) report: CompareReport,
    /// With false discovery rate control: the cell's q-value and whether it is kept.
    pub(in crate::export) fdr: Option<(f64, bool)>,
}

/// Why a cell's verdict is not the transports' alone (see
/// [`crate::export::text::notes::limited_runs`]).
pub(super) fn caveat(c: &Cmp) -> Option<String> {
    crate::export::text::notes::limited_runs(&c.report)
}

/// Objects and rate first, as in the paper's figures; then the rest by name.
fn axis_rank(k: &str) -> u8 {
    match k {
        "objects" => 0,
        "rate" => 1,
        _ => 2,
    }
}

/// Axes whose value differs between cells, in `axis_rank` order.
pub(super) fn varying<'a>(
    params: impl Iterator<Item = &'a BTreeMap<String, String>>,
) -> Vec<String> {
    let mut varying: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in params {
        for (k, v) in p {
            varying.entry(k.clone()).or_default().insert(v.clone());
        }
    }
    varying.retain(|_, v| v.len() > 1);
    let mut keys: Vec<String> = varying.keys().cloned().collect();
    keys.sort_by_key(|k| axis_rank(k));
    keys
}

/// Axes whose value differs between cells; objects and rate first, as in the paper's figures.
pub(super) fn varying_axes(cells: &[Cmp]) -> Vec<String> {
    varying(cells.iter().map(|c| &c.cell.params))
}

/// Cells in the order of their values on `axes`, each by magnitude (5mbit before 10mbit), the
/// first axis slowest; the hash breaks ties so that the order never depends on the order in
/// which the files were read.
pub(super) fn by_axes(a: &Cell, b: &Cell, axes: &[String]) -> Ordering {
    axes.iter()
        .map(|k| {
            let (x, y) = (
                sort_key(a.params.get(k).map_or("", String::as_str)),
                sort_key(b.params.get(k).map_or("", String::as_str)),
            );
            x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
        })
        .find(|o| o.is_ne())
        .unwrap_or_else(|| a.hash.cmp(&b.hash))
}

/// The cell's axis values in axis order, for titles and anchors.
fn axis_values(cell: &Cell) -> Vec<(&String, &String)> {
    let mut kv: Vec<(&String, &String)> = cell.params.iter().collect();
    kv.sort_by_key(|(k, _)| axis_rank(k));
    kv
}

/// How the page names a cell: its axis values, `objects=10x50KB, rtt=50ms`; a sweep without
/// axes has one cell, named by its hash.
pub(super) fn title(cell: &Cell) -> String {
    let kv = axis_values(cell);
    if kv.is_empty() {
        return format!("cell {}", cell.hash);
    }
    kv.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An id for each cell's section, from its axis values (`cell-objects-10x50KB_rtt-50ms`), so
/// that a link to a cell survives a second report of the same sweep; the hash, then the
/// position, tell apart two cells whose values spell alike.
pub(super) fn anchors<'a>(cells: impl Iterator<Item = &'a Cell>) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut ids = Vec::new();
    for (i, cell) in cells.enumerate() {
        let slug: String = axis_values(cell)
            .iter()
            .map(|(k, v)| format!("{k}-{v}"))
            .collect::<Vec<_>>()
            .join("_")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let base = if slug.is_empty() {
            format!("cell-{}", cell.hash)
        } else {
            format!("cell-{slug}")
        };
        let id = [base.clone(), format!("{base}-{}", cell.hash)]
            .into_iter()
            .find(|id| !seen.contains(id))
            .unwrap_or_else(|| format!("{base}-{}-{i}", cell.hash));
        seen.insert(id.clone());
        ids.push(id);
    }
    ids
}

/// Sorts axis values numerically where they have a number in front (5mbit < 10mbit).
pub(super) fn sort_key(v: &str) -> (f64, String) {
    let num: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let scale = if v.contains("gbit") || v.contains("GB") {
        1e9
    } else if v.contains("mbit") || v.contains("MB") {
        1e6
    } else if v.contains("kbit") || v.contains("KB") {
        1e3
    } else {
        1.0
    };
    let lead = v.split('x').next().unwrap_or("");
    let count: f64 = if v.contains('x') {
        lead.parse().unwrap_or(1.0)
    } else {
        1.0
    };
    let size: f64 = v
        .rsplit('x')
        .next()
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect::<String>()
        })
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    let value = if v.contains('x') {
        count * size * scale
    } else {
        num.parse::<f64>().unwrap_or(0.0) * scale
    };
    (value, v.to_string())
}
