//! `.hgrm` files: a report's histogram as HdrHistogram's percentile distribution, in
//! milliseconds, for HdrHistogram's plotter and HistogramLogAnalyzer.

use clap::ValueEnum;
use qbench_core::{HistogramExport, Report, Summary};

// flags/cli.rs names `qbench hgrm`'s arguments by this path.

/// Values are microseconds; `.hgrm` files are conventionally read in milliseconds.
const US_PER_MS: f64 = 1000.0;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// Object latency (from the intended start at a --rate)
    #[default]
    Latency,
    Ttfb,
    /// An open loop's actual send -> last byte
    ServiceTime,
    /// An open loop's actual send - intended start
    Lag,
}

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
