//! `.hgrm` files: a report's histogram as HdrHistogram's percentile distribution, in
//! milliseconds, for HdrHistogram's plotter and HistogramLogAnalyzer.

use qbench_core::{HistogramExport, Report, Summary};

use crate::flags::tools::Which;

/// Values are microseconds; `.hgrm` files are conventionally read in milliseconds.
const US_PER_MS: f64 = 1000.0;

fn histogram(s: &Summary, which: Which) -> Option<&HistogramExport> {
    match which {
        Which::Latency => Some(&s.object_latency),
        Which::Ttfb => Some(&s.ttfb),
        Which::ServiceTime => s.load.as_ref()?.service_time.as_ref(),
        Which::Lag => s.load.as_ref()?.lag.as_ref(),
    }
}

fn distribution(h: &HistogramExport) -> anyhow::Result<String> {
    Ok(h.histogram()?.hgrm(US_PER_MS))
}

/// The distribution of `which` in `report`; `None` when the report has no such histogram
/// (the open loop's own ones, in a report of a run without `--rate`).
pub fn text(report: &Report, which: Which) -> anyhow::Result<Option<String>> {
    histogram(&report.summary, which)
        .map(distribution)
        .transpose()
}

/// The object latency, which every report has.
pub fn latency(report: &Report) -> anyhow::Result<String> {
    distribution(&report.summary.object_latency)
}
