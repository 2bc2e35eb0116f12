//! `qbench diff OLD NEW`: two saved run reports compared, figure by figure, with a verdict for
//! every per-run figure both hold.

use std::path::Path;

use qbench_core::report::diff::DiffReport;

use crate::export::text::diff_table;
use crate::export::{write_json, write_text, Dest};
use crate::flags::tools::{DiffArgs, DiffFormat};

fn read(path: &Path, what: &'static str) -> anyhow::Result<qbench_core::Report> {
    Ok(crate::commands::merge::read_report(path, what)?)
}

pub fn diff(args: DiffArgs) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        qbench_engine::files::check_not_inputs(
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
