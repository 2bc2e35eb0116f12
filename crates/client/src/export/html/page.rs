//! What every page qbench writes shares: the document's head with its one stylesheet, so
//! that a page opens offline and looks the same whichever command wrote it.

use std::fmt::Write as _;

use crate::export::escape;

/// The page fits 1,100 px; numbers never wrap (a p of 6.99e-1 over two lines), words in the
/// cell and verdict columns do, and below that width each table and heatmap scrolls on its
/// own while the charts shrink to the page.
const STYLE: &str = "body{font-family:Helvetica,Arial,sans-serif;margin:1em auto;padding:0 1em;max-width:1100px;box-sizing:border-box}\
.scroll{overflow-x:auto;max-width:100%;margin:0.5em 0}\
table{border-collapse:collapse;font-size:13px}\
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\
th{background:#f4f4f4;white-space:normal;vertical-align:bottom}\
th.w{text-align:left}\
td.w{text-align:left;white-space:normal;min-width:9em}\
td.k{text-align:left}\
.charts{display:flex;flex-wrap:wrap;gap:1em}\
.charts svg{max-width:100%;height:auto}\
.verdict{font-size:16px;border:1px solid #999;background:#fafafa;padding:0.6em 0.8em}\
.bad{color:#b00;font-weight:bold}\
.note{color:#555}\
code{font-size:12px}";

/// Everything up to and including `<body>`; `generator` tells which command wrote the page.
pub(super) fn head(title: &str, generator: &str) -> String {
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><meta name=\"generator\" content=\"{}\"><title>qbench: {}</title><style>{STYLE}</style></head><body>",
        escape::html(generator),
        escape::html(title)
    );
    html
}

pub(super) const END: &str = "</body></html>\n";
