//! `qbench diff OLD NEW`: two saved run reports compared, figure by figure, with a verdict for
//! every per-run figure both hold.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use qbench_core::report::diff::DiffReport;
use qbench_core::stats::effect::{Test, DEFAULT_TEST};

use crate::export::text::diff_table;
use crate::export::{write_json, write_text, Dest};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// A table for people.
    Text,
    /// A Markdown table, e.g. for a pull request.
    Markdown,
    /// Raw numbers, one row per figure.
    Csv,
    /// The diff report (`qbench schema diff`).
    Json,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier run report (`qbench --json FILE`, or `qbench merge`'s)
    #[arg(value_name = "OLD")]
    pub old: PathBuf,

    /// The later run report, compared against OLD
    #[arg(value_name = "NEW")]
    pub new: PathBuf,

    /// How to write the comparison
    #[arg(long, value_enum, default_value = "text")]
    pub format: DiffFormat,

    /// The test behind each per-run figure's verdict, as `compare --test`
    #[arg(long, value_enum, default_value_t = DEFAULT_TEST)]
    pub test: Test,

    /// Write it to this file instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

fn read(path: &Path, what: &'static str) -> anyhow::Result<qbench_core::Report> {
    Ok(crate::commands::merge::read_report(path, what)?)
}

pub fn diff(args: DiffArgs) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        qbench_engine::output::overwrite::check_not_inputs(
            &[("--out", out)],
            &[("OLD", &args.old), ("NEW", &args.new)],
        )?;
    }
    let old = read(&args.old, "OLD")?;
    let new = read(&args.new, "NEW")?;
    let d = DiffReport::of(
        &args.old.display().to_string(),
        &old,
        &args.new.display().to_string(),
        &new,
        args.test,
    );
    let text = match args.format {
        DiffFormat::Json => {
            let dest = args.out.map_or(Dest::Stdout, Dest::File);
            return write_json(&dest, &d);
        }
        DiffFormat::Text => diff_table::text(&d),
        DiffFormat::Markdown => diff_table::markdown(&d),
        DiffFormat::Csv => diff_table::csv(&d),
    };
    match &args.out {
        Some(path) => write_text(path, &text),
        None => {
            crate::console::out(&text);
            Ok(())
        }
    }
}
