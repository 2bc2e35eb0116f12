//! The summary lines of a video session or a page load, over a report's runs.

use qbench_core::{Rate, Report, Stats};

fn stats(report: &Report, f: impl Fn(&qbench_core::RunReport) -> Option<f64>) -> Stats {
    let v: Vec<f64> = report.runs.iter().filter_map(f).collect();
    Stats::of(&v)
}

fn ms(v: f64) -> String {
    format!("{:.1} ms", v / 1e3)
}

/// Median over the runs, with the spread when there are several.
fn med(s: &Stats, show: impl Fn(f64) -> String) -> String {
    match (s.median, s.n) {
        (None, _) => "-".into(),
        (Some(m), 1) => show(m),
        (Some(m), n) => format!("{} (sd {}, n={n})", show(m), s.sd.map_or("-".into(), &show)),
    }
}

pub(crate) fn lines(report: &Report, line: &mut dyn FnMut(&str, String)) {
    if report.runs.iter().any(|r| r.video.is_some()) {
        video(report, line);
    }
    if let Some(p) = report.runs.iter().find_map(|r| r.page.as_ref()) {
        let levels: Vec<String> = (0..p.levels.len())
            .map(|l| {
                let done = stats(report, |r| {
                    r.page.as_ref()?.levels.get(l)?.done_us.map(|d| d as f64)
                });
                format!("L{l} {} obj {}", p.levels[l].objects, med(&done, ms))
            })
            .collect();
        line(
            "page",
            format!(
                "{}: {} objects, {} bytes, {} origin(s), {} connection(s)",
                p.name,
                super::numbers::count(p.objects),
                super::numbers::count(p.bytes),
                p.origins,
                p.connections.iter().sum::<u64>()
            ),
        );
        line("levels done", levels.join(", "));
    }
}

fn video(report: &Report, line: &mut dyn FnMut(&str, String)) {
    let v = |r: &qbench_core::RunReport| r.video.clone();
    let start = stats(report, |r| v(r)?.time_to_start_us.map(|t| t as f64));
    let rebuffers = stats(report, |r| Some(f64::from(v(r)?.rebuffers)));
    let ratio = stats(report, |r| v(r)?.rebuffer_ratio);
    let bitrate = stats(report, |r| v(r)?.mean_bitrate_bps);
    let switches = stats(report, |r| Some(f64::from(v(r)?.switches)));
    let loaded = stats(report, |r| Some(v(r)?.loaded_fraction));
    line("video start", med(&start, ms));
    line(
        "rebuffers",
        format!(
            "{}; stalled {} of play time",
            med(&rebuffers, |x| format!("{x:.0}")),
            med(&ratio, |x| format!("{:.1}%", x * 100.0))
        ),
    );
    line(
        "bitrate",
        format!(
            "{} mean; {} switches",
            med(&bitrate, |b| Rate(b.round() as u64).to_string()),
            med(&switches, |x| format!("{x:.0}"))
        ),
    );
    line(
        "loaded",
        format!(
            "{} of the video",
            med(&loaded, |x| format!("{:.1}%", x * 100.0))
        ),
    );
}
