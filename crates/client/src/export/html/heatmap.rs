//! Heatmaps of a sweep's effect in its metric (IMC'17 Figures 6-8 and 15 for PLT): each
//! square is coloured and labelled by the effect of the test that decided its verdict, red
//! where the QUIC side was better and blue where the TCP side was (B and A when the sides are
//! not one of each), white where the verdict is not significant.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use qbench_core::report::compare::Verdict;

use super::cell::{caveat, sort_key, title, Cmp};
use crate::export::escape;

/// The test's relative effect, oriented so that positive means the red side was better;
/// `None` when not significant, or when false discovery rate control does not keep the cell.
fn gain(f: &Cmp) -> Option<f64> {
    let c = &f.report.comparison;
    let d = c.effect.as_ref()?.rel_pct?;
    if c.verdict == Verdict::Inconclusive || f.fdr.is_some_and(|(_, kept)| !kept) {
        return None;
    }
    Some(quic_sign(f) * d)
}

/// Whether exactly one side of the cell is QUIC.
fn one_quic(f: &Cmp) -> bool {
    f.report.a.config.spec.proto.is_quic() != f.report.b.config.spec.proto.is_quic()
}

/// -1 when A is the QUIC side and B is not: turns "B better" into "QUIC better".
fn quic_sign(f: &Cmp) -> f64 {
    if one_quic(f) && f.report.a.config.spec.proto.is_quic() {
        -1.0
    } else {
        1.0
    }
}

/// What red and blue mean on the heatmaps of `cells`: QUIC and TCP only when every cell has
/// one of each, else B and A, named when every cell names them alike.
pub(super) fn key(cells: &[Cmp]) -> (String, String) {
    if !cells.is_empty() && cells.iter().all(one_quic) {
        return ("QUIC better".into(), "TCP better".into());
    }
    let first = cells
        .first()
        .map(|c| (&c.report.label_a, &c.report.label_b));
    match first {
        Some((a, b))
            if cells
                .iter()
                .all(|c| (&c.report.label_a, &c.report.label_b) == (a, b)) =>
        {
            (format!("B ({b}) better"), format!("A ({a}) better"))
        }
        _ => ("B better".into(), "A better".into()),
    }
}

/// The hover text of a square: the effect's interval, p and q.
fn hover(f: &Cmp) -> String {
    let c = &f.report.comparison;
    let s = quic_sign(f);
    let mut t = format!("{}: {} rounds", title(&f.cell), f.report.rounds);
    if let Some(e) = &c.effect {
        if let (Some(lo), Some(hi)) = (e.rel_low_pct, e.rel_high_pct) {
            let (lo, hi) = ((s * lo).min(s * hi), (s * lo).max(s * hi));
            let _ = write!(
                t,
                "; effect {:+.1}% [{lo:+.1}%, {hi:+.1}%] ({}, {:.0}% interval)",
                s * e.rel_pct.unwrap_or(0.0),
                c.test.name(),
                e.level * 100.0
            );
        }
    }
    if let Some(p) = c.p {
        let _ = write!(t, "; p {p:.2e}");
    }
    if let Some((q, kept)) = f.fdr {
        let dropped = !kept && c.verdict != Verdict::Inconclusive;
        let _ = write!(
            t,
            "; q {q:.2e}{}",
            if dropped { " (not kept by FDR)" } else { "" }
        );
    }
    t
}

fn color(gain: Option<f64>) -> String {
    match gain {
        None => "#ffffff".into(),
        Some(g) => {
            let t = (g.abs() / 50.0).min(1.0);
            let fade = (255.0 * (1.0 - 0.85 * t)) as u8;
            if g > 0.0 {
                format!("#ff{fade:02x}{fade:02x}")
            } else {
                format!("#{fade:02x}{fade:02x}ff")
            }
        }
    }
}

fn sorted(values: BTreeSet<String>) -> Vec<String> {
    let mut v: Vec<String> = values.into_iter().collect();
    v.sort_by(|a, b| {
        let (x, y) = (sort_key(a), sort_key(b));
        x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
    });
    v
}

/// One coloured square of a heatmap, at axis values `x` and `y`.
pub(super) struct Square<'a> {
    pub x: Cow<'a, str>,
    pub y: &'a str,
    pub fill: String,
    pub text: String,
    /// Shown on hover.
    pub title: String,
    /// Why the square's verdict is not the transports' alone (see [`caveat`]): drawn with a
    /// dashed border and the reason under the effect, never as a plain verdict.
    pub caveat: Option<String>,
}

/// The squares of `cells` on axes `x` and `y` (`None`: a one-axis strip). With no axis
/// (`x` empty: a sweep of one cell, or of cells that differ in nothing) each cell is a square
/// of its own, named by its sides.
pub(super) fn squares<'a>(cells: &[&'a Cmp], x: &str, y: Option<&str>) -> Vec<Square<'a>> {
    cells
        .iter()
        .filter_map(|c| {
            let xv: Cow<'a, str> = match x {
                "" => format!("{} vs {}", c.report.label_a, c.report.label_b).into(),
                x => c.cell.params.get(x)?.as_str().into(),
            };
            let yv = match y {
                Some(y) => c.cell.params.get(y)?.as_str(),
                None => "",
            };
            let (fill, text) = heatmap_square(c);
            let caveat = caveat(c);
            let mut title = hover(c);
            if let Some(w) = &caveat {
                let _ = write!(title, "; WARNING: {w}");
            }
            Some(Square {
                x: xv,
                y: yv,
                fill,
                text,
                title,
                caveat,
            })
        })
        .collect()
}

/// Fill and text of one heatmap square: the deciding test's effect, or why there is none.
fn heatmap_square(c: &Cmp) -> (String, String) {
    let effect = c.report.comparison.effect.as_ref().and_then(|e| e.rel_pct);
    let g = gain(c);
    (
        color(g),
        effect.map_or("-".into(), |_| match (g, c.fdr) {
            (Some(g), _) => format!("{g:+.0}%"),
            // Significant alone, not after FDR control.
            (None, Some((_, false))) if c.report.comparison.verdict != Verdict::Inconclusive => {
                "n.s. (FDR)".into()
            }
            (None, _) => "n.s.".into(),
        }),
    )
}

/// What fits under a square's effect: which of link and client limited it.
fn short_caveat(w: &str) -> String {
    let parts: Vec<&str> = [("link", "link short"), ("client", "client-limited")]
        .into_iter()
        .filter(|(k, _)| w.contains(k))
        .map(|(_, s)| s)
        .collect();
    format!("! {}", parts.join(", "))
}

/// One heatmap: `y` axis values as rows (one row when there is no `y`), `x` as columns.
/// Cost is linear in squares plus axis values: missing cells are one grey background, not
/// a square each.
pub(super) fn heatmap(title: &str, x: &str, y: Option<&str>, squares: &[Square<'_>]) -> String {
    let xs = sorted(squares.iter().map(|s| s.x.to_string()).collect());
    let ys = sorted(squares.iter().map(|s| s.y.to_string()).collect());
    let index = |v: &[String]| -> HashMap<String, usize> {
        v.iter().enumerate().map(|(i, s)| (s.clone(), i)).collect()
    };
    let (xi, yi) = (index(&xs), index(&ys));
    let (cw, ch, left, top) = (90.0, 40.0, 110.0, 60.0);
    let (gw, gh) = (cw * xs.len() as f64, ch * ys.len() as f64);
    let w = left + gw + 20.0;
    let h = top + gh + 50.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        o,
        r##"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="14">{}</text><rect x="{left}" y="{top}" width="{gw}" height="{gh}" fill="#eeeeee" stroke="#999"/>"##,
        w / 2.0,
        escape::html(title)
    );
    for (i, xv) in xs.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            left + cw * (i as f64 + 0.5),
            top - 8.0,
            escape::html(xv)
        );
    }
    for (j, yv) in ys.iter().enumerate().filter(|_| y.is_some()) {
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            top + ch * (j as f64 + 0.5) + 4.0,
            escape::html(yv)
        );
    }
    for s in squares {
        let (cx, cy) = (
            left + cw * xi[s.x.as_ref()] as f64,
            top + ch * yi[s.y] as f64,
        );
        let (stroke, mark) = match &s.caveat {
            Some(w) => (
                r##"stroke="#000" stroke-width="2" stroke-dasharray="4 3""##,
                format!(
                    r#"<text x="{}" y="{}" text-anchor="middle" font-size="9">{}</text>"#,
                    cx + cw / 2.0,
                    cy + ch - 5.0,
                    escape::html(&short_caveat(w))
                ),
            ),
            None => (r##"stroke="#999""##, String::new()),
        };
        let _ = writeln!(
            o,
            r##"<g><title>{}</title><rect x="{cx}" y="{cy}" width="{cw}" height="{ch}" fill="{}" {stroke}/><text x="{}" y="{}" text-anchor="middle">{}</text>{mark}</g>"##,
            escape::html(&s.title),
            s.fill,
            cx + cw / 2.0,
            cy + ch / 2.0 + if s.caveat.is_some() { 0.0 } else { 4.0 },
            escape::html(&s.text)
        );
    }
    let caption = match y {
        Some(y) => format!("{} (rows: {})", escape::html(x), escape::html(y)),
        None => escape::html(x),
    };
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{caption}</text>"#,
        left + gw / 2.0,
        h - 18.0,
    );
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_values_sort_by_magnitude() {
        let v: BTreeSet<String> = ["100mbit", "5mbit", "10mbit", "1gbit"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(sorted(v), ["5mbit", "10mbit", "100mbit", "1gbit"]);
        let o: BTreeSet<String> = ["1x10MB", "1x5KB", "200x10KB", "1x100KB"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(sorted(o), ["1x5KB", "1x100KB", "200x10KB", "1x10MB"]);
    }

    fn grid(n: usize, rows: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|i| (format!("{i}x1KB"), format!("{}mbit", 1 + i % rows)))
            .collect()
    }

    #[test]
    fn one_axis_is_a_strip_and_missing_cells_cost_nothing() {
        let cells = grid(1000, 1);
        let sq: Vec<Square<'_>> = cells
            .iter()
            .map(|(x, _)| Square {
                x: x.into(),
                y: "",
                fill: "#fff".into(),
                text: "n.s.".into(),
                title: String::new(),
                caveat: None,
            })
            .collect();
        let svg = heatmap("t", "objects", None, &sq);
        // Background, grid and one square per cell: not 1000 x 1000.
        assert_eq!(svg.matches("<rect").count(), 2 + 1000);
        assert!(svg.contains(r#"height="40""#) && !svg.contains("rows:"));
        // A sparse grid: 1000 columns x 100 rows, 1000 cells.
        let cells = grid(1000, 100);
        let sq: Vec<Square<'_>> = cells
            .iter()
            .map(|(x, y)| Square {
                x: x.into(),
                y,
                fill: "#fff".into(),
                text: String::new(),
                title: String::new(),
                caveat: None,
            })
            .collect();
        let svg = heatmap("t", "objects", Some("rate"), &sq);
        assert_eq!(svg.matches("<rect").count(), 2 + 1000);
        assert!(svg.contains("rows: rate"));
    }

    #[test]
    fn colors() {
        assert_eq!(color(None), "#ffffff");
        // Red for the QUIC side (or B), blue for the other, deeper with the gain, saturated
        // from 50% on.
        assert_eq!(color(Some(30.0)), "#ff7c7c");
        assert_eq!(color(Some(-30.0)), "#7c7cff");
        assert_eq!(color(Some(50.0)), "#ff2626");
        assert_eq!(color(Some(400.0)), "#ff2626");
        assert_eq!(color(Some(0.0)), "#ffffff");
    }
}
