//! `qbench hgrm`: a saved report's histogram as an `.hgrm` file.

use std::path::Path;

use clap::ValueEnum;
use qbench_core::Report;
use qbench_engine::error::ConfigError;

use crate::export::hgrm::text;
use crate::export::write_text;
use crate::flags::tools::{HgrmArgs, Which};

pub fn command(args: HgrmArgs) -> anyhow::Result<()> {
    qbench_engine::files::check_writable("--out", Path::new(&args.out))?;
    qbench_engine::files::check_not_inputs(
        &[("--out", Path::new(&args.out))],
        &[("REPORT", &args.report)],
    )?;
    let report = read_report(&args.report)?;
    let out = text(&report, args.of)?.ok_or_else(|| not_recorded(args.of))?;
    write_text(Path::new(&args.out), &out)
}

/// An unreadable report is bad input, named as the argument it came from.
fn read_report(path: &Path) -> anyhow::Result<Report> {
    let bad = |message: String| ConfigError {
        flag: "REPORT",
        message,
    };
    let json = qbench_engine::files::read_text(
        path,
        qbench_core::spec::input::MAX_REPORT_BYTES,
        "a report",
    )
    .map_err(bad)?;
    Ok(Report::from_json(&json).map_err(|e| bad(format!("{}: {e}", path.display())))?)
}

/// Only the open loop's own histograms can be missing from a report.
fn not_recorded(which: Which) -> ConfigError {
    let name = which
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string());
    ConfigError {
        flag: "--of",
        message: format!("{name} is recorded by an open loop (--rate) alone"),
    }
}
