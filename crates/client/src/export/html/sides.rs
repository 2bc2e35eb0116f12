//! Charts of one or more run reports side by side: the run page draws one side, the compare
//! page and each cell of the sweep page two.

use qbench_core::histogram::HistogramExport;
use qbench_core::report::ccstate::StateMachine;
use qbench_core::report::telemetry::Timeline;
use qbench_core::stats::metric::Metric;
use qbench_core::Report;

use crate::export::svg::{cdf_chart, cwnd_chart, line_chart, Series};

/// A report with the label the page gives it (a protocol, or a comparison's side).
pub(super) type Side<'a> = (&'a str, &'a Report);

/// Distribution functions of a histogram of every side, `None` when no side recorded a value
/// (TTFB of a run that fetched nothing): an empty chart would read as a broken one.
fn cdf(
    title: &str,
    x_label: &str,
    sides: &[Side<'_>],
    of: fn(&Report) -> &HistogramExport,
) -> anyhow::Result<Option<String>> {
    let mut series = Vec::new();
    for (label, rep) in sides {
        let h = of(rep).histogram()?;
        series.push(Series {
            label: format!("{label} (n={})", h.len()),
            points: h
                .cdf(100)
                .into_iter()
                .map(|(us, q)| (us as f64 / 1000.0, q))
                .collect(),
        });
    }
    if series.iter().all(|s| s.points.is_empty()) {
        return Ok(None);
    }
    Ok(Some(cdf_chart(
        title,
        x_label,
        "fraction of objects",
        &series,
    )))
}

/// A side whose recorded histogram cannot be decoded fails the page.
pub(super) fn latency_cdf(name: &str, sides: &[Side<'_>]) -> anyhow::Result<Option<String>> {
    cdf(
        &format!("object latency CDF, {name}"),
        "object latency (ms)",
        sides,
        |r| &r.summary.object_latency,
    )
}

pub(super) fn ttfb_cdf(name: &str, sides: &[Side<'_>]) -> anyhow::Result<Option<String>> {
    cdf(
        &format!("time to first byte CDF, {name}"),
        "time to first byte (ms)",
        sides,
        |r| &r.summary.ttfb,
    )
}

/// A metric's scale and unit for people.
fn scaled(m: Metric) -> (f64, &'static str) {
    match m {
        Metric::Goodput | Metric::Bitrate => (1e-6, "Mbit/s"),
        Metric::Rps => (1.0, "req/s"),
        Metric::Rebuffer | Metric::Loaded => (100.0, "%"),
        _ => (1e-3, "ms"),
    }
}

/// Every round's value of `m`, per side, so that bimodal rounds and drift show.
pub(super) fn per_round(name: &str, m: Metric, sides: &[Side<'_>]) -> String {
    let (scale, unit) = scaled(m);
    let series: Vec<Series> = sides
        .iter()
        .map(|(label, rep)| Series {
            label: label.to_string(),
            points: rep
                .runs
                .iter()
                .filter_map(|run| Some((f64::from(run.index) + 1.0, m.of(run)? * scale)))
                .collect(),
        })
        .collect();
    line_chart(
        &format!("{} per round, {name}", m.title()),
        "round",
        &format!("{} ({unit})", m.title()),
        &series,
        None,
    )
}

/// The first connection of each side's first run; `None` when no side recorded one.
pub(super) fn first_round_cwnd(name: &str, sides: &[Side<'_>]) -> Option<String> {
    let lines: Vec<(String, &Timeline)> = sides
        .iter()
        .filter_map(|(label, rep)| {
            let t = rep
                .runs
                .first()
                .and_then(|run| run.telemetry.as_ref())
                .and_then(|t| t.first())?;
            Some((format!("{label}: {} {}", t.transport, t.cc), t))
        })
        .collect();
    (!lines.is_empty()).then(|| cwnd_chart(&format!("cwnd, first round, {name}"), &lines))
}

/// One inferred machine per side, over all its runs' connections; `None` for a side without
/// telemetry.
pub(super) fn inferred_machines<'a>(sides: &[Side<'a>]) -> Vec<(&'a str, Option<StateMachine>)> {
    sides
        .iter()
        .map(|&(label, rep)| {
            let timelines: Vec<&Timeline> = rep
                .runs
                .iter()
                .flat_map(|run| run.telemetry.iter().flatten())
                .collect();
            (
                label,
                (!timelines.is_empty()).then(|| StateMachine::infer(&timelines)),
            )
        })
        .collect()
}

/// Interval lines of every side: p50 and p99 of the object latency, and the completed
/// rate, over the time since the first run started; a later run's intervals follow the
/// earlier run's on one axis. `None` when no side recorded an interval (without
/// `--interval`).
pub(super) fn over_time(name: &str, sides: &[Side<'_>]) -> Option<[String; 2]> {
    if sides
        .iter()
        .all(|(_, r)| r.runs.iter().all(|run| run.intervals.is_empty()))
    {
        return None;
    }
    let mut latency = Vec::new();
    let mut rate = Vec::new();
    for (label, rep) in sides {
        let (mut p50, mut p99, mut done) = (Vec::new(), Vec::new(), Vec::new());
        let mut offset = 0.0;
        for run in &rep.runs {
            let mut end = run.duration_us as f64 / 1e6;
            for iv in &run.intervals {
                let x = offset + iv.end_us as f64 / 1e6;
                end = end.max(iv.end_us as f64 / 1e6);
                let s = &iv.latency.summary;
                // An interval in which nothing completed has no latency: a gap, not a zero.
                if s.count > 0 {
                    p50.extend(s.p50_us.map(|v| (x, v as f64 / 1000.0)));
                    p99.extend(s.p99_us.map(|v| (x, v as f64 / 1000.0)));
                }
                if iv.seconds() > 0.0 {
                    done.push((x, iv.completed as f64 / iv.seconds()));
                }
            }
            offset += end;
        }
        latency.push(Series {
            label: format!("{label} p50"),
            points: p50,
        });
        latency.push(Series {
            label: format!("{label} p99"),
            points: p99,
        });
        rate.push(Series {
            label: label.to_string(),
            points: done,
        });
    }
    Some([
        line_chart(
            &format!("object latency per interval, {name}"),
            "time since the first run started (s)",
            "object latency (ms)",
            &latency,
            None,
        ),
        line_chart(
            &format!("completed per interval, {name}"),
            "time since the first run started (s)",
            "objects completed per second",
            &rate,
            None,
        ),
    ])
}

/// p50 and p99 of each run's object latency, per side: where no intervals were recorded,
/// the runs are the finest steps in time the report has. `None` with fewer than two runs a
/// side, where a line would be a dot.
pub(super) fn per_run_latency(name: &str, run_word: &str, sides: &[Side<'_>]) -> Option<String> {
    if sides.iter().all(|(_, r)| r.runs.len() < 2) {
        return None;
    }
    let mut series = Vec::new();
    for (label, rep) in sides {
        let at = |f: fn(&qbench_core::PercentileSummary) -> Option<u64>| {
            rep.runs
                .iter()
                .filter(|run| run.object_latency.summary.count > 0)
                .filter_map(|run| {
                    let v = f(&run.object_latency.summary)?;
                    Some((f64::from(run.index) + 1.0, v as f64 / 1000.0))
                })
                .collect()
        };
        series.push(Series {
            label: format!("{label} p50"),
            points: at(|s| s.p50_us),
        });
        series.push(Series {
            label: format!("{label} p99"),
            points: at(|s| s.p99_us),
        });
    }
    Some(line_chart(
        &format!("object latency per {run_word}, {name}"),
        run_word,
        "object latency (ms)",
        &series,
        None,
    ))
}
