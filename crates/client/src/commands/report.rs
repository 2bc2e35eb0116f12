//! `qbench report`: a sweep's cell files, judged anew if asked, as one HTML page with its
//! heatmaps and scaling charts beside it as SVG files.

use std::path::Path;

use anyhow::Context;
use qbench_core::report::compare::{CompareReport, Comparison};
use qbench_core::scenario::cell::{CellFile, CellReport};
use qbench_core::scenario::Cell;
use qbench_core::stats::discoveries;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_engine::output::target::{resolve, Target};
use qbench_engine::plan::error::ConfigError;

use crate::export::html::{page, Page, Sweep};
use crate::export::write_text;
use crate::flags::cli::ReportArgs;

pub fn report(args: ReportArgs) -> anyhow::Result<()> {
    check_page_dest(&args.html)?;
    let mut sweep = read_cells(&args.dir)?;
    if args.metric.is_some() || args.test.is_some() {
        rejudge(&mut sweep.comparisons, args.metric, args.test)?;
    }
    sweep.fdr = args
        .fdr
        .level()
        .map(|level| control_fdr(&sweep.comparisons, level));
    let cells = sweep.comparisons.len();
    let page = page(sweep)?;
    write_page(&args.html, &page)?;
    crate::say!(
        "wrote {} ({} cells, {} heatmap(s), {} scaling chart(s), latency CDFs, cwnd timelines and state shares per cell)",
        args.html.display(),
        cells,
        page.heatmaps.len(),
        page.charts.len()
    );
    Ok(())
}

/// The heatmaps and charts are SVG files beside the page: a stream or a device has no
/// "beside".
fn check_page_dest(html: &Path) -> anyhow::Result<()> {
    qbench_engine::output::check_writable("--html", html)?;
    if !matches!(resolve(html), Ok(Target::Replace(_))) {
        return Err(ConfigError {
            flag: "--html",
            message: format!(
                "{}: the page's heatmaps and charts are written beside it as SVG files; name a file",
                html.display()
            ),
        }
        .into());
    }
    Ok(())
}

fn read_cells(dir: &Path) -> anyhow::Result<Sweep> {
    let mut comparisons = Vec::new();
    let mut competitions = Vec::new();
    let mut scenario: Option<String> = None;
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = e?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !(name.starts_with("cell-") && name.ends_with(".json")) {
            continue;
        }
        let bytes = qbench_engine::setup::input::read_bytes(
            &path,
            qbench_core::spec::input::MAX_REPORT_BYTES,
            "a cell file",
        )
        .map_err(anyhow::Error::msg)?;
        let f = CellFile::from_slice(&bytes).with_context(|| path.display().to_string())?;
        scenario.get_or_insert_with(|| f.scenario.clone());
        match f.report {
            CellReport::Compare(report) => comparisons.push((f.cell, *report)),
            CellReport::Compete(c) => competitions.push((f.cell, *c)),
        }
    }
    anyhow::ensure!(
        !(comparisons.is_empty() && competitions.is_empty()),
        "{}: no cell-*.json files (run `qbench sweep` first)",
        dir.display()
    );
    Ok(Sweep {
        scenario: scenario.unwrap_or_default(),
        comparisons,
        fdr: None,
        competitions,
    })
}

/// `--metric` and `--test`: every comparison judged anew from its runs.
fn rejudge(
    cells: &mut [(Cell, CompareReport)],
    metric: Option<Metric>,
    test: Option<Test>,
) -> anyhow::Result<()> {
    for (cell, r) in cells {
        let m = metric.unwrap_or(r.comparison.metric);
        m.check(r.a.config.spec.load.as_ref())
            .map_err(|message| ConfigError {
                flag: "--metric",
                message: format!("cell {}: {message}", cell.label()),
            })?;
        let t = test.unwrap_or(r.comparison.test);
        r.comparison = Comparison::of(&r.a.runs, &r.b.runs, m, t);
    }
    Ok(())
}

/// Benjamini-Hochberg over the cells' p-values at `level`.
fn control_fdr(cells: &[(Cell, CompareReport)], level: f64) -> Vec<Option<(f64, bool)>> {
    let p: Vec<Option<f64>> = cells.iter().map(|(_, r)| r.comparison.p).collect();
    discoveries(&p, level)
}

/// Heatmap `i` goes to `heatmap-<i>.svg` in the page's directory, scaling chart `i` to
/// `scaling-<i>.svg`.
fn write_page(html: &Path, page: &Page) -> anyhow::Result<()> {
    let out_dir = html
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for (i, svg) in page.heatmaps.iter().enumerate() {
        write_text(&out_dir.join(format!("heatmap-{i}.svg")), svg)?;
    }
    for (i, svg) in page.charts.iter().enumerate() {
        write_text(&out_dir.join(format!("scaling-{i}.svg")), svg)?;
    }
    write_text(html, &page.html)
}
