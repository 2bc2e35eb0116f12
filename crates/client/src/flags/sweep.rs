//! `qbench sweep`: a scenario file's cells, run into a directory or listed.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Scenario file (TOML), e.g. scenarios/smoke.toml
    pub scenario: PathBuf,

    /// Directory for the per-cell results; finished cells found there are not run again
    #[arg(long, value_name = "DIR", required_unless_present = "dry_run")]
    pub out: Option<PathBuf>,

    /// List the cells, each with its comparison and how long its transfers take at the least,
    /// and run nothing
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub fdr: crate::flags::judge::FdrArgs,
}
