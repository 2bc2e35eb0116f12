//! What the HTML report's parts share: one comparison cell as they draw it, and escaping.

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
