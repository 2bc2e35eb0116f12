//! What the HTML report's parts share: one comparison cell as they draw it, the axes that vary
//! between cells, and escaping.

use std::collections::{BTreeMap, BTreeSet};

use qbench_core::report::compare::CompareReport;
use qbench_core::scenario::Cell;

/// A comparison cell of a sweep.
pub(super) struct Cmp {
    pub(super) cell: Cell,
    pub(super) report: CompareReport,
    /// With false discovery rate control: the cell's q-value and whether it is kept.
    pub(super) fdr: Option<(f64, bool)>,
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Axes whose value differs between cells; objects and rate first, as in the paper's figures.
pub(super) fn varying_axes(cells: &[Cmp]) -> Vec<String> {
    let mut varying: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in cells {
        for (k, v) in &c.cell.params {
            varying.entry(k.clone()).or_default().insert(v.clone());
        }
    }
    varying.retain(|_, v| v.len() > 1);
    let mut keys: Vec<String> = varying.keys().cloned().collect();
    keys.sort_by_key(|k| match k.as_str() {
        "objects" => 0,
        "rate" => 1,
        _ => 2,
    });
    keys
}
