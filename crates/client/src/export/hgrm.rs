//! `.hgrm` files: a report's histogram as HdrHistogram's percentile distribution, in
//! milliseconds, for HdrHistogram's plotter and HistogramLogAnalyzer.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use qbench_core::{HistogramExport, Report, Summary};

use qbench_engine::plan::error::ConfigError;

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

#[derive(Debug, Args)]
pub struct HgrmArgs {
    /// A run report (`qbench --json`), or a merged one (`qbench merge`)
    #[arg(value_name = "REPORT")]
    pub report: PathBuf,

    /// Which histogram, over all runs of the report
    #[arg(long, value_enum, default_value = "latency")]
    pub of: Which,

    /// Where to write the distribution (`-` for stdout)
    #[arg(short, long, value_name = "FILE", default_value = "-")]
    pub out: String,
}

fn histogram(s: &Summary, which: Which) -> Option<&HistogramExport> {
    match which {
        Which::Latency => Some(&s.object_latency),
        Which::Ttfb => Some(&s.ttfb),
        Which::ServiceTime => s.load.as_ref()?.service_time.as_ref(),
        Which::Lag => s.load.as_ref()?.lag.as_ref(),
    }
}

/// The distribution of `which` in `report`; an error names what is missing.
pub fn text(report: &Report, which: Which) -> anyhow::Result<String> {
    let h = histogram(&report.summary, which).ok_or_else(|| {
        let name = which
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string());
        ConfigError {
            flag: "--of",
            message: format!("{name} is recorded by an open loop (--rate) alone"),
        }
    })?;
    Ok(h.histogram()?.hgrm(US_PER_MS))
}

/// `--hgrm FILE`: the object latency of the benchmark just run.
pub fn write(path: &Path, report: &Report) -> anyhow::Result<()> {
    super::write_text(path, &text(report, Which::Latency)?)
}

pub fn command(args: HgrmArgs) -> anyhow::Result<()> {
    qbench_engine::output::check_writable("--out", Path::new(&args.out))?;
    let shown = args.report.display().to_string();
    let bad = |message: String| ConfigError {
        flag: "REPORT",
        message,
    };
    let json = qbench_engine::setup::input::read_text(
        &args.report,
        qbench_core::spec::input::MAX_REPORT_BYTES,
        "a report",
    )
    .map_err(bad)?;
    let report = Report::from_json(&json).map_err(|e| bad(format!("{shown}: {e}")))?;
    let out = text(&report, args.of)?;
    super::write_text(Path::new(&args.out), &out)
}
