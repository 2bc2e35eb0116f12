//! `qbench report FILE.json`: a saved run or compare report (`--json`) as the page `--html`
//! writes, for a report whose run did not ask for one.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use qbench_core::report::compare::{self, CompareReport};
use qbench_core::Report;
use qbench_engine::error::{usage, ConfigError};
use serde::Deserialize;

use crate::export::html::{compare as html_compare, run as html_run};
use crate::export::write_text;
use crate::flags::cli::ReportArgs;

/// A page the default destination may replace: one qbench wrote from a report.
fn ours(path: &Path) -> bool {
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut head));
    let head = String::from_utf8_lossy(&head);
    read.is_ok()
        && [html_run::GENERATOR, html_compare::GENERATOR]
            .iter()
            .any(|g| head.contains(&format!("content=\"{g}\"")))
}

/// The page of the report at `args.dir`, written to `--html` or beside it as FILE.html.
pub(super) fn report_file(args: &ReportArgs) -> anyhow::Result<()> {
    no_judging(args)?;
    let path = &args.dir;
    let meta = std::fs::metadata(path).map_err(|e| bad(path, e))?;
    let t = meta.file_type();
    if t.is_char_device() || t.is_block_device() || t.is_socket() {
        let what = "a device or socket: give a saved run or compare report, or a sweep's directory";
        return Err(bad(path, what).into());
    }
    let dest = destination(args)?;
    let text = qbench_engine::files::read_text(
        path,
        qbench_core::spec::input::MAX_REPORT_BYTES,
        "a report",
    )
    .map_err(|m| ConfigError {
        flag: "REPORT",
        message: m,
    })?;
    let page = page(path, &text)?;
    write_text(&dest, &page).context("--html")?;
    crate::say!("wrote {}", dest.display());
    Ok(())
}

/// The report named on the command line, and what is wrong with it.
fn bad(path: &Path, message: impl std::fmt::Display) -> ConfigError {
    ConfigError {
        flag: "REPORT",
        message: format!("{}: {message}", path.display()),
    }
}

/// Refuses the flags that judge a sweep's cells: a saved report is drawn as it was judged.
fn no_judging(args: &ReportArgs) -> anyhow::Result<()> {
    let flag = if args.metric.is_some() {
        "--metric"
    } else if args.test.is_some() {
        "--test"
    } else {
        "--fdr"
    };
    usage(
        args.metric.is_none() && args.test.is_none() && args.fdr.fdr.is_none() && !args.fdr.no_fdr,
        flag,
        "judges a sweep's cells; a saved report is drawn as it was judged",
    )?;
    Ok(())
}

/// Where the page goes: `--html`, or beside the report, where only a page qbench wrote may be
/// replaced; checked writable and not the report itself before the report is read.
fn destination(args: &ReportArgs) -> anyhow::Result<PathBuf> {
    let dest = args
        .html
        .clone()
        .unwrap_or_else(|| args.dir.with_extension("html"));
    usage(
        args.html.is_some() || !dest.exists() || ours(&dest),
        "--html",
        format!(
            "{} exists and is not a page qbench wrote from a report; name the page with --html",
            dest.display()
        ),
    )?;
    qbench_engine::files::check_writable("--html", &dest)?;
    qbench_engine::files::check_not_inputs(&[("--html", &dest)], &[("REPORT", &args.dir)])?;
    Ok(dest)
}

/// The page of `text`, a run or compare report by its schema; a compare report of a version
/// this qbench does not read, or any other document, is refused by name.
fn page(path: &Path, text: &str) -> anyhow::Result<String> {
    #[derive(Deserialize)]
    struct Header {
        schema: String,
        schema_version: u32,
    }
    let h: Header = serde_json::from_str(text).map_err(|e| bad(path, e))?;
    let page = match h.schema.as_str() {
        qbench_core::report::SCHEMA => {
            let r = Report::from_json(text).map_err(|e| bad(path, e))?;
            html_run::page(&r)?
        }
        compare::SCHEMA
            if (compare::OLDEST_READ..=compare::SCHEMA_VERSION).contains(&h.schema_version) =>
        {
            let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(path, e))?;
            if let Some((field, message)) =
                qbench_core::report::histograms_read::first_corrupt(&doc)
            {
                return Err(bad(path, format!("histogram `{field}`: {message}")).into());
            }
            let r: CompareReport = serde_json::from_value(doc).map_err(|e| bad(path, e))?;
            html_compare::page(&r)?
        }
        compare::SCHEMA => {
            return Err(bad(
                path,
                format!(
                    "compare report version {} (this qbench reads versions {} to {})",
                    h.schema_version,
                    compare::OLDEST_READ,
                    compare::SCHEMA_VERSION
                ),
            )
            .into())
        }
        other => {
            return Err(bad(
                path,
                format!(
                    "a `{other}` document: give a run or compare report (--json), or a sweep's directory"
                ),
            )
            .into())
        }
    };
    Ok(page)
}
