//! Heatmaps of a sweep's percent PLT difference (IMC'17 Figures 6-8 and 15): red where QUIC
//! was faster, blue where TCP was, white where the difference is not significant.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use qbench_core::compare::Verdict;

use super::html::{esc, Cmp};

/// Percent difference oriented so that positive means the QUIC side was faster (B faster
/// when neither or both sides are QUIC); `None` when not significant.
fn quic_gain(f: &Cmp) -> Option<f64> {
    let c = &f.report.comparison;
    let d = c.plt_diff_pct?;
    if c.verdict == Verdict::Inconclusive {
        return None;
    }
    let (a_quic, b_quic) = (
        f.report.a.config.spec.proto.is_quic(),
        f.report.b.config.spec.proto.is_quic(),
    );
    Some(if a_quic && !b_quic { -d } else { d })
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

/// Sorts axis values numerically where they have a number in front (5mbit < 10mbit).
fn sort_key(v: &str) -> (f64, String) {
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

fn sorted(values: BTreeSet<String>) -> Vec<String> {
    let mut v: Vec<String> = values.into_iter().collect();
    v.sort_by(|a, b| {
        let (x, y) = (sort_key(a), sort_key(b));
        x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
    });
    v
}

fn axis_values(cells: &[&Cmp], axis: &str) -> Vec<String> {
    sorted(
        cells
            .iter()
            .filter_map(|c| c.cell.params.get(axis).cloned())
            .collect(),
    )
}

/// Fill and text of one heatmap square; grey and empty where the sweep has no such cell.
fn heatmap_square(cell: Option<&Cmp>) -> (String, String) {
    match cell {
        Some(c) => {
            let d = c.report.comparison.plt_diff_pct;
            let g = quic_gain(c);
            (
                color(g),
                d.map_or("-".into(), |_| {
                    g.map_or("n.s.".into(), |g| format!("{g:+.0}%"))
                }),
            )
        }
        None => ("#eeeeee".into(), String::new()),
    }
}

/// One heatmap: `y` axis values as rows, `x` as columns.
pub(super) fn heatmap(title: &str, x: &str, y: &str, cells: &[&Cmp]) -> String {
    let (xs, ys) = (axis_values(cells, x), axis_values(cells, y));
    let (cw, ch, left, top) = (90.0, 40.0, 110.0, 60.0);
    let w = left + cw * xs.len() as f64 + 20.0;
    let h = top + ch * ys.len() as f64 + 50.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        o,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    for (i, xv) in xs.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            left + cw * (i as f64 + 0.5),
            top - 8.0,
            esc(xv)
        );
    }
    for (j, yv) in ys.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            top + ch * (j as f64 + 0.5) + 4.0,
            esc(yv)
        );
        for (i, xv) in xs.iter().enumerate() {
            let cell = cells
                .iter()
                .copied()
                .find(|c| c.cell.params.get(x) == Some(xv) && c.cell.params.get(y) == Some(yv));
            let (fill, text) = heatmap_square(cell);
            let (cx, cy) = (left + cw * i as f64, top + ch * j as f64);
            let _ = writeln!(
                o,
                r##"<rect x="{cx}" y="{cy}" width="{cw}" height="{ch}" fill="{fill}" stroke="#999"/><text x="{}" y="{}" text-anchor="middle">{}</text>"##,
                cx + cw / 2.0,
                cy + ch / 2.0 + 4.0,
                esc(&text)
            );
        }
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{} (rows: {})</text>"#,
        left + cw * xs.len() as f64 / 2.0,
        h - 18.0,
        esc(x),
        esc(y)
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

    #[test]
    fn colors() {
        assert_eq!(color(None), "#ffffff");
        // Red for QUIC, blue for TCP, deeper with the gain, saturated from 50% on.
        assert_eq!(color(Some(30.0)), "#ff7c7c");
        assert_eq!(color(Some(-30.0)), "#7c7cff");
        assert_eq!(color(Some(50.0)), "#ff2626");
        assert_eq!(color(Some(400.0)), "#ff2626");
        assert_eq!(color(Some(0.0)), "#ffffff");
    }
}
