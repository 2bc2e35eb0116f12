//! `qbench merge`: shards' run reports into the report of the whole.

use std::path::{Path, PathBuf};

use qbench_core::report::merge::{merge as merge_reports, MergeInfo};
use qbench_core::{Report, ToolInfo};

use crate::export::{print_text, write_json, Dest};
use crate::flags::tools::MergeArgs;
use qbench_engine::error::ConfigError;

fn bad(message: String) -> ConfigError {
    qbench_engine::error::bad("REPORT", message)
}

/// The files named, with directories expanded to their *.json files in name order.
fn files(inputs: &[PathBuf], out: Option<&Path>) -> Result<Vec<PathBuf>, ConfigError> {
    // The same file by another name (`./x`, a link, a hard link) is the same file.
    let id = |p: &Path| qbench_engine::files::identity(p).ok().flatten();
    let out_id = out.and_then(id);
    let same = |f: &Path, o: &Path| f == o || out_id.is_some() && id(f) == out_id;
    let mut files = Vec::new();
    for p in inputs {
        if !p.is_dir() {
            files.push(p.clone());
            continue;
        }
        let entries = std::fs::read_dir(p).map_err(|e| bad(format!("{}: {e}", p.display())))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| {
                f.extension().is_some_and(|x| x == "json") && out.is_none_or(|o| !same(f, o))
            })
            .collect();
        if found.is_empty() {
            return Err(bad(format!("{}: no *.json reports in it", p.display())));
        }
        found.sort();
        files.extend(found);
    }
    if let Some(o) = out {
        let inputs: Vec<_> = files.iter().map(|f| ("REPORT", f.as_path())).collect();
        qbench_engine::files::check_not_inputs(&[("--out", o)], &inputs)?;
    }
    Ok(files)
}

fn read(path: &Path) -> Result<Report, ConfigError> {
    read_report(path, "REPORT")
}

/// A run report from `path`, bounded in size; an error names `what` (the argument) and the
/// file.
pub(crate) fn read_report(path: &Path, what: &'static str) -> Result<Report, ConfigError> {
    let bad = |message| qbench_engine::error::bad(what, message);
    let text = qbench_engine::files::read_text(
        path,
        qbench_core::spec::input::MAX_REPORT_BYTES,
        "a report",
    )
    .map_err(bad)?;
    Report::from_json(&text).map_err(|e| bad(format!("{}: {e}", path.display())))
}

/// One line per shard: where it ran, how it started, whether it completed.
fn shard_lines(m: &MergeInfo) -> String {
    let mut out = String::new();
    for s in &m.shards {
        let start = s.start.as_ref().map_or(String::new(), |st| {
            format!(
                ", started {:+.3} ms from the barrier{}",
                st.skew_us as f64 / 1e3,
                if st.late { " (late)" } else { "" }
            )
        });
        out.push_str(&format!(
            "  shard {}/{} {} on {}{start}: {}\n",
            s.index,
            m.count,
            s.file,
            s.hostname.as_deref().unwrap_or("?"),
            match (&s.error, s.complete) {
                (_, true) => "complete".to_string(),
                (Some(e), false) => format!("INCOMPLETE: {e}"),
                (None, false) => "INCOMPLETE".to_string(),
            }
        ));
    }
    for i in &m.missing {
        out.push_str(&format!("  shard {i}/{}: MISSING\n", m.count));
    }
    if let Some(s) = m.start_spread_us {
        out.push_str(&format!(
            "  first runs started within {:.3} ms of each other\n",
            s as f64 / 1e3
        ));
    }
    out
}

pub fn merge(args: MergeArgs) -> anyhow::Result<()> {
    let dest = Dest::parse(&args.out);
    let out_path = (args.out != "-").then(|| PathBuf::from(&args.out));
    if let Some(p) = &out_path {
        qbench_engine::files::check_writable("--out", p)?;
    }
    let files = files(&args.inputs, out_path.as_deref())?;
    let inputs = files
        .iter()
        .map(|f| Ok((f.display().to_string(), read(f)?)))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let tool = ToolInfo {
        name: "qbench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let report = merge_reports(&inputs, tool, std::env::args().collect())
        .map_err(|e| bad(crate::console::printable(&e.to_string())))?;
    let info = report.merged.as_ref().expect("a merged report says so");
    let headline = format!(
        "qbench merge: {} of {} shard(s) of {} over {} connection(s)",
        info.shards.len(),
        info.count,
        report.config.spec.proto,
        report.config.spec.connections
    );
    let text = format!(
        "{}{}",
        crate::export::text::run::summary(&report, &headline),
        shard_lines(info)
    );
    // Hostnames, file names and errors come from the shards' files.
    print_text(&crate::console::printable(&text), Some(&dest));
    write_json(&dest, &report)?;
    anyhow::ensure!(
        report.complete,
        "{}",
        crate::console::printable(
            report
                .aborted
                .as_deref()
                .unwrap_or("some shard is incomplete")
        )
    );
    Ok(())
}
