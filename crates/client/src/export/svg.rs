//! Small SVG charts written directly: a line chart is all a cwnd timeline needs.

use std::fmt::Write as _;

use qbench_core::report::telemetry::Timeline;

use crate::export::escape;

pub struct Series {
    pub label: String,
    /// (x, y) in chart units.
    pub points: Vec<(f64, f64)>,
}

const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];
const W: f64 = 800.0;
const H: f64 = 450.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// Tick spacing of 1, 2 or 5 times a power of ten giving about `n` ticks up to `max`.
pub(super) fn tick_step(max: f64, n: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / n;
    let pow = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * pow)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * pow)
}

/// A tick label without float noise: as many decimals as the step needs.
pub(super) fn tick(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// Where chart units land on the canvas: axes from 0 to a round number above the data.
struct Frame {
    x_step: f64,
    y_step: f64,
    x_top: f64,
    y_top: f64,
}

impl Frame {
    fn fit(series: &[Series], hline: Option<(f64, &str)>) -> Self {
        let all = series.iter().flat_map(|s| s.points.iter());
        let x_max = all.clone().map(|p| p.0).fold(0.0, f64::max);
        let y_max = all
            .map(|p| p.1)
            .chain(hline.map(|h| h.0))
            .fold(0.0, f64::max);
        let (x_step, y_step) = (tick_step(x_max, 8.0), tick_step(y_max * 1.05, 6.0));
        Self {
            x_step,
            y_step,
            x_top: (x_max / x_step).ceil().max(1.0) * x_step,
            y_top: (y_max * 1.05 / y_step).ceil().max(1.0) * y_step,
        }
    }

    /// A fraction's axis: 0 to 1 in fifths, whatever the data (a CDF never passes 1).
    fn fraction(series: &[Series]) -> Self {
        Self {
            y_step: 0.2,
            y_top: 1.0,
            ..Self::fit(series, None)
        }
    }

    fn px(&self, x: f64) -> f64 {
        LEFT + x / self.x_top * (W - LEFT - RIGHT)
    }

    fn py(&self, y: f64) -> f64 {
        H - BOTTOM - y / self.y_top * (H - TOP - BOTTOM)
    }
}

fn grid(o: &mut String, f: &Frame) {
    let mut x = 0.0;
    while x <= f.x_top + f.x_step / 2.0 {
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#e5e5e5"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"##,
            f.px(x),
            TOP,
            H - BOTTOM,
            H - BOTTOM + 18.0,
            tick(x, f.x_step)
        );
        x += f.x_step;
    }
    let mut y = 0.0;
    while y <= f.y_top + f.y_step / 2.0 {
        let _ = writeln!(
            o,
            r##"<line x1="{1}" y1="{0:.1}" x2="{2}" y2="{0:.1}" stroke="#e5e5e5"/><text x="{3}" y="{4:.1}" text-anchor="end">{5}</text>"##,
            f.py(y),
            LEFT,
            W - RIGHT,
            LEFT - 6.0,
            f.py(y) + 4.0,
            tick(y, f.y_step)
        );
        y += f.y_step;
    }
}

fn plot_border_and_axis_labels(o: &mut String, x_label: &str, y_label: &str) {
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 15.0,
        escape::html(x_label)
    );
    let _ = writeln!(
        o,
        r#"<text transform="translate(20 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        escape::html(y_label)
    );
}

fn reference_line(o: &mut String, f: &Frame, v: f64, label: &str) {
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#555" stroke-dasharray="6 4"/><text x="{2}" y="{3:.1}" text-anchor="end" fill="#555">{4}</text>"##,
        f.py(v),
        W - RIGHT,
        W - RIGHT - 4.0,
        f.py(v) - 4.0,
        escape::html(label)
    );
}

/// The `i`th series' line and its legend entry, stacked top left inside the plot.
fn series_line(o: &mut String, f: &Frame, i: usize, s: &Series) {
    let color = PALETTE[i % PALETTE.len()];
    let pts: Vec<String> = s
        .points
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", f.px(*x), f.py(*y)))
        .collect();
    let _ = writeln!(
        o,
        r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
        pts.join(" ")
    );
    // A line of one point draws nothing: a connection with one telemetry sample is a dot.
    if let [(x, y)] = s.points.as_slice() {
        let _ = writeln!(
            o,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
            f.px(*x),
            f.py(*y)
        );
    }
    let ly = TOP + 16.0 + 16.0 * i as f64;
    let _ = writeln!(
        o,
        r#"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="{color}" stroke-width="3"/><text x="{3}" y="{4}">{5}</text>"#,
        LEFT + 12.0,
        ly,
        LEFT + 32.0,
        LEFT + 38.0,
        ly + 4.0,
        escape::html(&s.label)
    );
}

/// A line chart; `hline` draws a labelled horizontal reference (e.g. a cap).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    hline: Option<(f64, &str)>,
) -> String {
    let frame = Frame::fit(series, hline);
    chart(&frame, [title, x_label, y_label], series, hline)
}

/// A distribution function: its y-axis runs from 0 to 1.
pub fn cdf_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    chart(
        &Frame::fraction(series),
        [title, x_label, y_label],
        series,
        None,
    )
}

fn chart(
    frame: &Frame,
    [title, x_label, y_label]: [&str; 3],
    series: &[Series],
    hline: Option<(f64, &str)>,
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        escape::html(title)
    );
    grid(&mut o, frame);
    plot_border_and_axis_labels(&mut o, x_label, y_label);
    if let Some((v, label)) = hline {
        reference_line(&mut o, frame, v, label);
    }
    for (i, s) in series.iter().enumerate() {
        series_line(&mut o, frame, i, s);
    }
    o.push_str("</svg>\n");
    o
}

/// cwnd (KB) over time (ms), one line per timeline; the cap, if any, as a dashed line.
pub fn cwnd_chart(title: &str, timelines: &[(String, &Timeline)]) -> String {
    let series: Vec<Series> = timelines
        .iter()
        .map(|(label, t)| Series {
            label: label.clone(),
            points: t
                .samples
                .iter()
                .map(|s| (s.t_us as f64 / 1000.0, s.cwnd_bytes as f64 / 1000.0))
                .collect(),
        })
        .collect();
    let cap = timelines
        .iter()
        .find_map(|(_, t)| t.cwnd_cap_bytes)
        .map(|c| (c as f64 / 1000.0, "cwnd cap"));
    line_chart(
        title,
        "time since connection start (ms)",
        "congestion window (KB)",
        &series,
        cap,
    )
}

/// The inferred congestion-control state machine as a picture: states on a circle, sized by
/// their share of time, arrows labelled with transition probabilities (the paper's Figure 3).
pub fn state_graph(title: &str, m: &qbench_core::report::ccstate::StateMachine) -> String {
    let states: Vec<_> = m.time_fraction.keys().copied().collect();
    // One state (a connection that never left application-limited) is one node in the
    // middle of a short canvas, not at the top of an empty circle.
    let (w, h, r) = match states.len() {
        0 | 1 => (520.0, 120.0, 0.0),
        _ => (520.0, 420.0, 150.0),
    };
    let (cx, cy) = (w / 2.0, h / 2.0 + 10.0);
    let n = states.len().max(1) as f64;
    let pos = |i: usize| {
        let a = std::f64::consts::TAU * i as f64 / n - std::f64::consts::FRAC_PI_2;
        (cx + r * a.cos(), cy + r * a.sin())
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" font-size="11"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs><rect width="100%" height="100%" fill="white"/><text x="{}" y="20" text-anchor="middle" font-size="13">{}</text>"##,
        w / 2.0,
        escape::html(title)
    );
    let index = |s| states.iter().position(|x| *x == s);
    for (from, tos) in &m.transitions {
        for (to, p) in tos {
            let (Some(i), Some(j)) = (index(*from), index(*to)) else {
                continue;
            };
            let ((x1, y1), (x2, y2)) = (pos(i), pos(j));
            // Shorten to the node edges and bow the line so a->b and b->a do not overlap.
            // The distance from an ellipse's centre to its edge along (ux, uy), plus a gap:
            let (dx, dy) = (x2 - x1, y2 - y1);
            let len = (dx * dx + dy * dy).sqrt().max(1.0);
            let (ux, uy) = (dx / len, dy / len);
            let edge = 1.0 / ((ux / 58.0).powi(2) + (uy / 26.0).powi(2)).sqrt() + 4.0;
            let (sx, sy, ex, ey) = (
                x1 + ux * edge,
                y1 + uy * edge,
                x2 - ux * edge,
                y2 - uy * edge,
            );
            let (mx, my) = ((sx + ex) / 2.0 - uy * 18.0, (sy + ey) / 2.0 + ux * 18.0);
            let _ = writeln!(
                o,
                r##"<path d="M {sx:.1} {sy:.1} Q {mx:.1} {my:.1} {ex:.1} {ey:.1}" fill="none" stroke="#555" marker-end="url(#arrow)"/><text x="{mx:.1}" y="{my:.1}" text-anchor="middle" fill="#333">{p:.2}</text>"##
            );
        }
    }
    for (i, s) in states.iter().enumerate() {
        let (x, y) = pos(i);
        let f = m.time_fraction[s];
        let _ = writeln!(
            o,
            r##"<ellipse cx="{x:.1}" cy="{y:.1}" rx="58" ry="26" fill="#eef3fb" stroke="#1f77b4" stroke-width="{:.1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{:.1}%</text>"##,
            1.0 + 4.0 * f,
            y - 2.0,
            s.name(),
            y + 12.0,
            f * 100.0
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_have_no_float_noise() {
        assert_eq!(tick(0.1 + 0.2 + 0.3, 0.2), "0.6");
        assert_eq!(tick(40.0, 20.0), "40");
    }

    #[test]
    fn state_graph_draws_every_state_and_transition() {
        use qbench_core::report::ccstate::{CcState, StateMachine};
        let mut m = StateMachine::default();
        m.time_fraction.insert(CcState::SlowStart, 0.25);
        m.time_fraction.insert(CcState::CongestionAvoidance, 0.75);
        m.transitions
            .entry(CcState::SlowStart)
            .or_default()
            .insert(CcState::CongestionAvoidance, 1.0);
        let svg = state_graph("t", &m);
        assert_eq!(svg.matches("<ellipse").count(), 2);
        assert_eq!(svg.matches("marker-end").count(), 1);
        assert!(svg.contains("75.0%") && svg.contains("1.00"));
        let mut one = StateMachine::default();
        one.time_fraction.insert(CcState::ApplicationLimited, 1.0);
        let svg = state_graph("t", &one);
        assert!(
            svg.contains(r#"height="120""#) && svg.contains(r#"cx="260.0" cy="70.0""#),
            "{svg}"
        );
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0, 5.0), 20.0);
        assert_eq!(tick_step(7.0, 8.0), 1.0);
        assert_eq!(tick_step(0.0, 8.0), 1.0);
    }

    /// The y tick labels of a chart, bottom to top.
    fn y_ticks(svg: &str) -> Vec<String> {
        svg.lines()
            .filter(|l| l.contains(r#"text-anchor="end">"#) && l.starts_with("<line x1=\"80\""))
            .filter_map(|l| l.split(r#"text-anchor="end">"#).nth(1))
            .map(|t| t.trim_end_matches("</text>").to_string())
            .collect()
    }

    /// A CDF's axis ends at 1 (a fit to 1.05 of the data would run it to 1.2), while a
    /// chart of other figures still leaves room above its highest point.
    #[test]
    fn a_cdf_axis_ends_at_one() {
        let cdf = Series {
            label: "a".into(),
            points: vec![(1.0, 0.0), (2.0, 0.5), (3.0, 1.0)],
        };
        let svg = cdf_chart("cdf", "ms", "fraction", std::slice::from_ref(&cdf));
        assert_eq!(y_ticks(&svg), ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        let svg = line_chart("t", "x", "y", &[cdf], None);
        assert_eq!(y_ticks(&svg).last().map(String::as_str), Some("1.2"));
    }

    #[test]
    fn a_series_of_one_point_is_a_dot() {
        let s = |points| Series {
            label: "a".into(),
            points,
        };
        let svg = line_chart("t", "x", "y", &[s(vec![(1.0, 2.0)])], None);
        assert_eq!(svg.matches("<circle").count(), 1, "{svg}");
        let svg = line_chart("t", "x", "y", &[s(vec![(1.0, 2.0), (2.0, 3.0)])], None);
        assert!(!svg.contains("<circle"));
    }

    #[test]
    fn chart_has_one_polyline_per_series_and_the_cap() {
        let s = |l: &str| Series {
            label: l.into(),
            points: vec![(0.0, 1.0), (10.0, 5.0)],
        };
        let svg = line_chart("t <1>", "x", "y", &[s("a"), s("b")], Some((4.0, "cap")));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    /// What `escape::html` made of `text` (the entities back to characters, `&amp;` last) is
    /// what a reader of the SVG sees: escaping changes how a label is written, not what it says.
    fn shown(text: &str) -> String {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
    }

    /// A title, axis label, reference label or legend entry is text: `&`, `<`, `>` and `"`
    /// come out as entities wherever the chart puts it, and read as they were given.
    #[test]
    fn labels_with_markup_characters_are_text() {
        let hostile = r#"a & <b>"c"</b>"#;
        let escaped = "a &amp; &lt;b&gt;&quot;c&quot;&lt;/b&gt;";
        let s = Series {
            label: hostile.into(),
            points: vec![(0.0, 1.0), (10.0, 5.0)],
        };
        let svg = line_chart(hostile, hostile, hostile, &[s], Some((4.0, hostile)));
        let texts: Vec<&str> = svg
            .split("</text>")
            .filter_map(|t| t.rsplit_once('>').map(|(_, text)| text))
            .filter(|t| t.starts_with("a "))
            .collect();
        assert_eq!(texts, [escaped; 5], "{svg}");
        assert!(texts.iter().all(|t| shown(t) == hostile));
        assert!(!svg.contains("<b>") && !svg.contains(r#""c""#), "{svg}");
        let m = qbench_core::report::ccstate::StateMachine::default();
        assert!(state_graph(hostile, &m).contains(&format!(">{escaped}</text>")));
    }
}
