//! Line charts of a sweep that varies a core-count axis (`connections`, `threads`): each
//! side's goodput and client CPU seconds per GB against N. A heatmap of percent differences
//! shows which side won at each N, not whether either side scaled.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use qbench_core::stats::metric::Metric;
use qbench_core::wire::Protocol;
use qbench_core::{RunReport, Stats};

use super::cell::{varying_axes, Cmp};
use crate::export::escape;
use crate::export::svg::{tick, tick_step};

/// The axes that decide how many cores a side can keep busy.
pub(super) const AXES: [&str; 2] = ["connections", "threads"];

/// What a panel plots, per round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Figure {
    Goodput,
    CpuPerGb,
}

impl Figure {
    const BOTH: [Self; 2] = [Self::Goodput, Self::CpuPerGb];

    /// The round's figure, `None` when the round lacks it.
    pub(super) fn of(self, run: &RunReport) -> Option<f64> {
        match self {
            // The report's own goodput (payload bits from the first request to the last
            // byte), so that the chart and the cell table agree.
            Self::Goodput => Metric::Goodput.of(run).map(|bps| bps / 1e9),
            Self::CpuPerGb => {
                let cpu = run.cpu.as_ref()?;
                // Files written before `client_s_per_gb` existed still hold what it is made of.
                cpu.client_s_per_gb.or_else(|| {
                    (run.payload_bytes > 0)
                        .then(|| cpu.client.total_s() / (run.payload_bytes as f64 / 1e9))
                })
            }
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::Goodput => "goodput",
            Self::CpuPerGb => "client CPU per GB of payload",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Self::Goodput => "Gbit/s",
            Self::CpuPerGb => "s/GB",
        }
    }

    fn y_label(self) -> String {
        match self {
            Self::Goodput => format!("goodput ({})", self.unit()),
            Self::CpuPerGb => format!("client CPU ({})", self.unit()),
        }
    }
}

/// One point of a line: the median over a cell's rounds, and the range of those rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Point {
    pub(super) n: u32,
    pub(super) median: f64,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) rounds: usize,
}

impl Point {
    fn of(n: u32, values: &[f64]) -> Option<Self> {
        let s = Stats::of(values);
        Some(Self {
            n,
            median: s.median?,
            min: s.min?,
            max: s.max?,
            rounds: s.n,
        })
    }
}

/// One side's line in a panel, its points in increasing N.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Line {
    pub(super) label: String,
    pub(super) colour: &'static str,
    /// Side B when both sides run one protocol, whose lines would otherwise look alike.
    pub(super) dashed: bool,
    pub(super) points: Vec<Point>,
}

/// Fixed per protocol so that a colour means one thing on every chart: QUIC red and TCP
/// blue, as on the heatmaps.
fn colour(p: Protocol) -> &'static str {
    match p {
        Protocol::H3 => "#d62728",
        Protocol::H2 => "#1f77b4",
        Protocol::H1 => "#2ca02c",
    }
}

/// A cell's N on `axis`; a value that is not a positive count has no place on a log axis.
fn n_of(c: &Cmp, axis: &str) -> Option<u32> {
    c.cell
        .params
        .get(axis)?
        .trim()
        .parse()
        .ok()
        .filter(|&n| n > 0)
}

/// The scaling axes with two or more counts among the cells.
pub(super) fn scaling_axes(cells: &[Cmp]) -> Vec<&'static str> {
    AXES.into_iter()
        .filter(|a| {
            let ns: BTreeSet<u32> = cells.iter().filter_map(|c| n_of(c, a)).collect();
            ns.len() > 1
        })
        .collect()
}

/// The cells with a count on `axis`, keyed by the `k=v` pairs of every other varying axis:
/// one chart per key, so that each line changes N alone.
pub(super) fn groups<'a>(cells: &'a [Cmp], axis: &str) -> BTreeMap<String, Vec<(u32, &'a Cmp)>> {
    let others: Vec<String> = varying_axes(cells)
        .into_iter()
        .filter(|k| k != axis)
        .collect();
    let mut groups: BTreeMap<String, Vec<(u32, &Cmp)>> = BTreeMap::new();
    for c in cells {
        let Some(n) = n_of(c, axis) else {
            continue;
        };
        let key = others
            .iter()
            .map(|k| format!("{k}={}", c.cell.params.get(k).map_or("", String::as_str)))
            .collect::<Vec<_>>()
            .join(" ");
        groups.entry(key).or_default().push((n, c));
    }
    groups
}

/// Per side of the group's comparisons, the figure's points; a side without any is left out.
pub(super) fn lines(members: &[(u32, &Cmp)], fig: Figure) -> Vec<Line> {
    // Keyed by side as well as label: a protocol compared with itself (two congestion
    // controllers, say) would otherwise pool both sides into one line.
    type PerN = BTreeMap<u32, Vec<f64>>;
    let mut sides: BTreeMap<(usize, String), (Protocol, PerN)> = BTreeMap::new();
    let mut same_proto = false;
    for (n, c) in members {
        let r = &c.report;
        same_proto |= r.a.config.spec.proto == r.b.config.spec.proto;
        for (side, (label, rep)) in [(&r.label_a, &r.a), (&r.label_b, &r.b)]
            .into_iter()
            .enumerate()
        {
            let label = if r.label_a == r.label_b {
                format!("{label} ({})", ["A", "B"][side])
            } else {
                label.clone()
            };
            let (_, per_n) = sides
                .entry((side, label))
                .or_insert_with(|| (rep.config.spec.proto, PerN::new()));
            per_n
                .entry(*n)
                .or_default()
                .extend(rep.runs.iter().filter_map(|run| fig.of(run)));
        }
    }
    sides
        .into_iter()
        .filter_map(|((side, label), (proto, per_n))| {
            let points: Vec<Point> = per_n.iter().filter_map(|(n, v)| Point::of(*n, v)).collect();
            (!points.is_empty()).then(|| Line {
                label,
                colour: colour(proto),
                dashed: side == 1 && same_proto,
                points,
            })
        })
        .collect()
}

const PANEL_W: f64 = 440.0;
const H: f64 = 380.0;
const TOP: f64 = 84.0;
const BOTTOM: f64 = H - 52.0;
const LEFT: f64 = 66.0;
const RIGHT: f64 = 16.0;
/// Keeps the outermost whiskers off the frame.
const PAD: f64 = 22.0;

/// Where a panel's values land: x is log2 N over the counts present, y runs from 0.
struct Frame {
    x0: f64,
    lo: f64,
    hi: f64,
    y_top: f64,
    y_step: f64,
}

impl Frame {
    fn left(&self) -> f64 {
        self.x0 + LEFT
    }

    fn right(&self) -> f64 {
        self.x0 + PANEL_W - RIGHT
    }

    fn px(&self, n: u32) -> f64 {
        if self.hi <= self.lo {
            return (self.left() + self.right()) / 2.0;
        }
        let t = (f64::from(n).log2() - self.lo) / (self.hi - self.lo);
        self.left() + PAD + t * (self.right() - self.left() - 2.0 * PAD)
    }

    fn py(&self, v: f64) -> f64 {
        BOTTOM - v / self.y_top * (BOTTOM - TOP)
    }
}

fn dash(dashed: bool) -> &'static str {
    if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    }
}

/// Frame, ticks and axis labels of the panel at `f.x0`.
fn panel_axes(o: &mut String, f: &Frame, fig: Figure, axis: &str, ns: &[u32]) {
    let (l, r) = (f.left(), f.right());
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="13">{}</text>"#,
        (l + r) / 2.0,
        TOP - 12.0,
        escape::html(fig.title())
    );
    let mut y = 0.0;
    while y <= f.y_top + f.y_step / 2.0 {
        let _ = writeln!(
            o,
            r##"<line x1="{l:.1}" y1="{0:.1}" x2="{r:.1}" y2="{0:.1}" stroke="#e5e5e5"/><text x="{1:.1}" y="{2:.1}" text-anchor="end">{3}</text>"##,
            f.py(y),
            l - 6.0,
            f.py(y) + 4.0,
            tick(y, f.y_step)
        );
        y += f.y_step;
    }
    for &n in ns {
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{BOTTOM}" stroke="#e5e5e5"/><text x="{0:.1}" y="{1}" text-anchor="middle">{n}</text>"##,
            f.px(n),
            BOTTOM + 16.0
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{l:.1}" y="{TOP}" width="{:.1}" height="{}" fill="none" stroke="#333"/>"##,
        r - l,
        BOTTOM - TOP
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{} (N, log2 scale)</text>"#,
        (l + r) / 2.0,
        H - 14.0,
        escape::html(axis)
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate({:.1} {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        f.x0 + 18.0,
        (TOP + BOTTOM) / 2.0,
        escape::html(&fig.y_label())
    );
}

/// One panel: per line, a whisker from the lowest to the highest round at each N, the line
/// through the medians, and a dot per median that names its figures on hover.
fn panel(o: &mut String, x0: f64, fig: Figure, axis: &str, ns: &[u32], lines: &[Line]) {
    let y_max = lines
        .iter()
        .flat_map(|l| &l.points)
        .map(|p| p.max)
        .fold(0.0, f64::max);
    let y_step = tick_step(y_max * 1.05, 5.0);
    let (lo, hi) = (
        ns.first().map_or(0.0, |&n| f64::from(n).log2()),
        ns.last().map_or(0.0, |&n| f64::from(n).log2()),
    );
    let f = Frame {
        x0,
        lo,
        hi,
        y_top: (y_max * 1.05 / y_step).ceil().max(1.0) * y_step,
        y_step,
    };
    panel_axes(o, &f, fig, axis, ns);
    for (i, line) in lines.iter().enumerate() {
        // Sides drawn a few pixels apart, so that equal figures do not hide a whisker.
        let dx = (i as f64 - (lines.len() as f64 - 1.0) / 2.0) * 6.0;
        let c = line.colour;
        let mut pts = Vec::new();
        for p in &line.points {
            let x = f.px(p.n) + dx;
            let (ylo, yhi, ym) = (f.py(p.min), f.py(p.max), f.py(p.median));
            pts.push(format!("{x:.1},{ym:.1}"));
            let _ = writeln!(
                o,
                r#"<line x1="{x:.1}" y1="{ylo:.1}" x2="{x:.1}" y2="{yhi:.1}" stroke="{c}"/><line x1="{:.1}" y1="{ylo:.1}" x2="{:.1}" y2="{ylo:.1}" stroke="{c}"/><line x1="{:.1}" y1="{yhi:.1}" x2="{:.1}" y2="{yhi:.1}" stroke="{c}"/>"#,
                x - 3.0,
                x + 3.0,
                x - 3.0,
                x + 3.0
            );
            let _ = writeln!(
                o,
                r#"<circle cx="{x:.1}" cy="{ym:.1}" r="3" fill="{c}"><title>{}</title></circle>"#,
                escape::html(&format!(
                    "{}, {axis}={}: median {:.3} {u}, min {:.3}, max {:.3} over {} round(s)",
                    line.label,
                    p.n,
                    p.median,
                    p.min,
                    p.max,
                    p.rounds,
                    u = fig.unit()
                ))
            );
        }
        let _ = writeln!(
            o,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.5"{} points="{}"/>"#,
            dash(line.dashed),
            pts.join(" ")
        );
    }
}

/// The sides of every panel, once each, in a row under the title.
fn legend(o: &mut String, panels: &[(Figure, Vec<Line>)]) {
    let mut seen: Vec<(&str, &str, bool)> = Vec::new();
    for l in panels.iter().flat_map(|(_, lines)| lines) {
        if !seen.iter().any(|(label, _, _)| *label == l.label) {
            seen.push((&l.label, l.colour, l.dashed));
        }
    }
    let mut x = LEFT;
    for (label, c, dashed) in seen {
        let _ = writeln!(
            o,
            r#"<line x1="{x:.1}" y1="44" x2="{:.1}" y2="44" stroke="{c}" stroke-width="3"{}/><text x="{:.1}" y="48">{}</text>"#,
            x + 24.0,
            dash(dashed),
            x + 30.0,
            escape::html(label)
        );
        // About the width of the label at this font size.
        x += 50.0 + 7.0 * label.chars().count() as f64;
    }
}

/// One chart of a group: a panel per figure with a point, side by side; `None` when no
/// figure has one.
fn chart(title: &str, axis: &str, members: &[(u32, &Cmp)]) -> Option<String> {
    let panels: Vec<(Figure, Vec<Line>)> = Figure::BOTH
        .into_iter()
        .map(|f| (f, lines(members, f)))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if panels.is_empty() {
        return None;
    }
    // Every N of the group, in both panels, so that they line up.
    let ns: Vec<u32> = members
        .iter()
        .map(|(n, _)| *n)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let w = PANEL_W * panels.len() as f64;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{H}" viewBox="0 0 {w} {H}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        o,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        escape::html(title)
    );
    legend(&mut o, &panels);
    for (i, (fig, lines)) in panels.iter().enumerate() {
        panel(&mut o, PANEL_W * i as f64, *fig, axis, &ns, lines);
    }
    o.push_str("</svg>\n");
    Some(o)
}

/// Every scaling chart of the sweep: per scaling axis with two or more counts, one chart per
/// combination of the other varying axes' values.
pub(super) fn charts(name: &str, cells: &[Cmp]) -> Vec<String> {
    let mut out = Vec::new();
    for axis in scaling_axes(cells) {
        for (group, members) in groups(cells, axis) {
            let title = if group.is_empty() {
                format!("{name}: scaling with {axis}")
            } else {
                format!("{name}: scaling with {axis} ({group})")
            };
            out.extend(chart(&title, axis, &members));
        }
    }
    out
}

/// The page's section: empty for a sweep without scaling charts.
pub(super) fn section(charts: &[String]) -> String {
    if charts.is_empty() {
        return String::new();
    }
    format!(
        "<h2>Scaling</h2><p>Goodput and the client's CPU seconds per GB of payload against the number of connections or threads, one line per side: each point is the median over the cell's rounds, its whisker runs from the lowest round to the highest.</p><div class=\"charts\">{}</div>",
        charts.concat()
    )
}
