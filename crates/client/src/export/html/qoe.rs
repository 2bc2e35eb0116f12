//! A sweep's video cells as IMC'17 Table 6 lays them out: per cell and side, the mean
//! (standard deviation) over rounds of time to start, video loaded, stalled time over play
//! time, rebuffers, and rebuffers per second played.

use std::fmt::Write as _;

use qbench_core::{Report, Stats};

use super::cell::{title, Cmp};
use crate::export::escape;

/// Mean (sd) of a figure over a side's runs that have it.
fn cell(
    report: &Report,
    scale: f64,
    digits: usize,
    f: impl Fn(&qbench_core::video::VideoReport) -> Option<f64>,
) -> String {
    let v: Vec<f64> = report
        .runs
        .iter()
        .filter_map(|r| r.video.as_ref().and_then(&f))
        .map(|x| x * scale)
        .collect();
    let s = Stats::of(&v);
    match s.mean {
        None => "-".into(),
        Some(m) => format!(
            "{m:.digits$} ({})",
            s.sd.map_or("-".into(), |sd| format!("{sd:.digits$}"))
        ),
    }
}

pub(super) fn table(cells: &[Cmp]) -> String {
    let video: Vec<&Cmp> = cells
        .iter()
        .filter(|c| c.report.a.runs.iter().any(|r| r.video.is_some()))
        .collect();
    if video.is_empty() {
        return String::new();
    }
    let mut html = String::from(
        "<h2>Video quality of experience</h2><p>Mean (standard deviation) over rounds, as IMC'17 Table 6. Buffer/play: time stalled over time playing.</p><div class=\"scroll\"><table><tr><th>cell</th><th>side</th><th>time to start (s)</th><th>video loaded (%)</th><th>buffer/play (%)</th><th>rebuffers</th><th>rebuffers per played s</th><th>mean bitrate (Mbit/s)</th></tr>",
    );
    for c in video {
        let r = &c.report;
        for (label, side) in [(&r.label_a, &r.a), (&r.label_b, &r.b)] {
            let _ = writeln!(
                html,
                "<tr><td class=\"w\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape::html(&title(&c.cell)),
                escape::html(label),
                cell(side, 1e-6, 2, |v| v.time_to_start_us.map(|t| t as f64)),
                cell(side, 100.0, 1, |v| Some(v.loaded_fraction)),
                cell(side, 100.0, 1, |v| v.rebuffer_ratio),
                cell(side, 1.0, 1, |v| Some(f64::from(v.rebuffers))),
                cell(side, 1.0, 3, |v| v.rebuffers_per_played_s),
                cell(side, 1e-6, 2, |v| v.mean_bitrate_bps),
            );
        }
    }
    html.push_str("</table></div>");
    html
}
