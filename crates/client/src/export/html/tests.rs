//! The page of `qbench report` as a reader meets it: cells in the order of their axis values,
//! titled by them and linked from the table, one effect per cell, every table able to scroll,
//! and the environment as a table.

use qbench_core::report::compare::CompareReport;
use qbench_core::scenario::Cell;
use qbench_core::stats::effect::Test;
use qbench_core::stats::fmt_p;
use qbench_core::Protocol;

use super::scaling_tests::{judged_cell, round, side};
use super::{page, Sweep};

const GB: u64 = 1_000_000_000;

/// A goodput comparison at `objects` and `rtt`: B's rounds take 0.9 of A's time.
fn cell(objects: &str, rtt: &str) -> (Cell, CompareReport) {
    let rounds = |secs: f64| {
        (0..5)
            .map(|i| round(i, GB, secs + f64::from(i) * 0.01, None))
            .collect()
    };
    let c = judged_cell(
        &[("objects", objects), ("rtt", rtt)],
        side(Protocol::H2, rounds(1.0)),
        side(Protocol::H3, rounds(0.9)),
        Test::Welch,
    );
    (c.cell, c.report)
}

/// Cells read in the order a directory lists them, hash order in effect.
fn shuffled() -> Vec<(Cell, CompareReport)> {
    vec![
        cell("2x200KB", "50ms"),
        cell("10x50KB", "10ms"),
        cell("1x10KB", "50ms"),
        cell("10x50KB", "50ms"),
        cell("1x10KB", "10ms"),
        cell("2x200KB", "10ms"),
    ]
}

fn html(comparisons: Vec<(Cell, CompareReport)>) -> String {
    page(Sweep {
        scenario: "t".into(),
        comparisons,
        fdr: None,
        competitions: vec![],
    })
    .unwrap()
    .html
}

/// The values of `attr="..."` in `html`, in order.
fn attrs<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    html.split(&format!("{attr}=\""))
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect()
}

/// Sections and rows follow the axis values by magnitude (1x10KB < 2x200KB < 10x50KB in
/// bytes, as the heatmap's columns; 10ms < 50ms), titled `objects=…, rtt=…`, never `cell 0` or the files' order.
#[test]
fn cells_are_ordered_and_titled_by_their_axis_values() {
    let html = html(shuffled());
    let titles: Vec<&str> = html
        .split("<h3 id=\"")
        .skip(1)
        .filter_map(|s| s.split('>').nth(1))
        .map(|s| s.trim_end_matches("</h3"))
        .collect();
    assert_eq!(
        titles,
        [
            "objects=1x10KB, rtt=10ms",
            "objects=1x10KB, rtt=50ms",
            "objects=2x200KB, rtt=10ms",
            "objects=2x200KB, rtt=50ms",
            "objects=10x50KB, rtt=10ms",
            "objects=10x50KB, rtt=50ms",
        ]
    );
    assert!(
        !html.contains("cell 0") && !html.contains("cell 1"),
        "{html}"
    );
    assert!(html.contains("object latency CDF, objects=1x10KB, rtt=10ms"));
}

/// Every row of the cells table links to its cell's section, and the ids are the axis values.
#[test]
fn every_row_links_to_its_section() {
    let html = html(shuffled());
    let table = html.split("<h2 id=\"cells\">Cells</h2>").nth(1).unwrap();
    let table = table.split("</table>").next().unwrap();
    let links: Vec<&str> = attrs(table, "href")
        .into_iter()
        .map(|h| h.trim_start_matches('#'))
        .collect();
    let ids: Vec<&str> = attrs(&html, "<h3 id");
    assert_eq!(links.len(), 6, "{table}");
    assert_eq!(links, ids);
    assert_eq!(ids[0], "cell-objects-1x10KB_rtt-10ms");
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
}

/// Cells whose values spell alike (after the id's character set) still get ids of their own.
#[test]
fn anchors_stay_unique() {
    let mut cells = vec![cell("1x1KB", "a b"), cell("1x1KB", "a-b")];
    cells[1].0.hash = "fedcba9876543210".into();
    let html = html(cells);
    let ids = attrs(&html, "<h3 id");
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "{ids:?}");
}

/// One effect per cell, the deciding test's; no difference of means beside it; p as the
/// terminal prints it; numbers do not wrap and every table can scroll sideways.
#[test]
fn the_table_shows_one_effect_and_numbers_that_do_not_wrap() {
    let cells = shuffled();
    let p = cells[4].1.comparison.p.unwrap();
    let html = html(cells);
    assert!(!html.contains("diff of means"), "{html}");
    let table = html.split("<h2 id=\"cells\">Cells</h2>").nth(1).unwrap();
    let table = table.split("</table>").next().unwrap();
    let head = table.split("</tr>").next().unwrap();
    assert_eq!(head.matches("effect").count(), 1, "{head}");
    assert!(
        head.contains("<th>mean A</th>"),
        "Welch compares means: {head}"
    );
    let first = table.split("</tr>").nth(1).unwrap();
    assert!(first.contains(&format!("<td>{}</td>", fmt_p(p))), "{first}");
    assert!(html.contains(
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap"
    ));
    assert_eq!(
        html.matches("<table").count(),
        html.matches("<div class=\"scroll\"><table").count(),
        "every table in a scrolling box"
    );
}

/// The page's latency CDFs end at 1.
#[test]
fn cdf_axes_end_at_one() {
    let html = html(shuffled());
    let cdf = html
        .split("<svg")
        .find(|s| s.contains("object latency CDF"))
        .unwrap();
    assert!(
        cdf.contains(">1.0</text>") && !cdf.contains(">1.2</text>"),
        "{cdf}"
    );
}

/// The environment is a table of keys and values, nested maps under a heading row, buffer
/// sizes with a unit; no JSON.
#[test]
fn the_environment_is_a_table() {
    let mut cells = shuffled();
    for (_, r) in &mut cells {
        let env = &mut r.a.environment;
        env.hostname = Some("bench-1".into());
        env.cores = Some(16);
        env.sysctls
            .insert("net.core.rmem_max".into(), "212992".into());
        env.sysctls
            .insert("net.ipv4.tcp_rmem".into(), "4096 131072 6291456".into());
    }
    let html = html(cells);
    let env = html
        .split("<h2 id=\"environment\">Environment</h2>")
        .nth(1)
        .unwrap();
    let env = env.split("<h2").next().unwrap();
    assert!(!env.contains("<pre>") && !env.contains('{'), "{env}");
    for row in [
        "<tr><td class=\"k\">hostname</td><td class=\"w\">bench-1</td></tr>",
        "<tr><td class=\"k\">cores</td><td class=\"w\">16</td></tr>",
        "<tr><th colspan=\"2\" class=\"w\">sysctls</th></tr>",
        "<tr><td class=\"k\">net.core.rmem_max</td><td class=\"w\">212992 (208 KiB)</td></tr>",
        "<td class=\"w\">4096 131072 6291456 (4 KiB / 128 KiB / 6 MiB: min, default, max)</td>",
    ] {
        assert!(env.contains(row), "{row}\n{env}");
    }
}
