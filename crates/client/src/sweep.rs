//! `qbench sweep`: every cell of a scenario file, one JSON file per cell, written atomically,
//! skipped when a complete file with the same hash is already there.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use qbench_core::cell::{CellFile, CellFileError, CellReport};
use qbench_core::compare::{Comparison, Verdict};
use qbench_core::metric::Metric;
use qbench_core::scenario::{Cell, CellSpec, Scenario};

use crate::cli::{Outputs, SweepArgs};
use crate::config::{LinkChoice, TargetArgs};
use crate::export::{write_json, Dest};

/// How a cell runs: its validated plan, built from the typed spec.
pub enum CellPlan {
    Compare(Box<crate::compare::Plan>),
    Compete(Box<crate::compete::Plan>),
}

/// `metric`: the scenario's, if it names one.
pub fn plan_for(cell: &Cell, metric: Option<Metric>) -> anyhow::Result<CellPlan> {
    let (target, link) = (TargetArgs::default(), LinkChoice::default());
    Ok(match &cell.spec {
        CellSpec::Compare(s) => CellPlan::Compare(Box::new(crate::compare::Plan::new(
            s,
            metric,
            &target,
            link,
            Outputs::default(),
        )?)),
        CellSpec::Compete(s) => {
            CellPlan::Compete(Box::new(crate::compete::Plan::new(s, &target, link)?))
        }
    })
}

fn cell_path(out: &Path, cell: &Cell) -> PathBuf {
    out.join(format!("cell-{}.json", &cell.hash[..16]))
}

/// Cell files of an earlier format in `out` would be neither reused nor reported.
fn check_out_dir(out: &Path) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("cell-") && name.ends_with(".json")) {
            continue;
        }
        // A damaged file is not refused here: its cell is simply run again.
        let Ok(bytes) = std::fs::read(e.path()) else {
            continue;
        };
        if let Err(err @ (CellFileError::Version(_) | CellFileError::Newer(_))) =
            CellFile::check_header(&bytes)
        {
            anyhow::bail!("--out: {}: {err}", e.path().display());
        }
    }
    Ok(())
}

fn read_cell(path: &Path) -> Option<CellFile> {
    CellFile::from_slice(&std::fs::read(path).ok()?).ok()
}

fn row(what: &str, report: &CellReport) -> String {
    match report {
        CellReport::Compare(r) => {
            let c = &r.comparison;
            format!(
                "  {what:<48} {:>8} {:>8} {:>10} {}",
                c.metric.name(),
                c.diff_pct.map_or("-".into(), |d| format!("{d:+.1}%")),
                c.welch
                    .as_ref()
                    .map_or("-".into(), |w| format!("{:.2e}", w.p)),
                match c.verdict {
                    Verdict::AFaster => r.label_a.as_str(),
                    Verdict::BFaster => r.label_b.as_str(),
                    Verdict::Inconclusive => "inconclusive",
                }
            )
        }
        CellReport::Compete(r) => format!(
            "  {what:<48} Jain's index {}",
            r.jain_index.map_or("-".into(), |j| format!("{j:.3}"))
        ),
    }
}

/// Runs one cell; returns its report and, when incomplete, why.
fn run_cell(plan: &CellPlan) -> anyhow::Result<(CellReport, Option<String>)> {
    Ok(match plan {
        CellPlan::Compare(p) => {
            let (r, e) = crate::compare::run_blocking(p, std::env::args().collect())?;
            (CellReport::Compare(Box::new(r)), e)
        }
        CellPlan::Compete(p) => {
            let r = crate::compete::run_blocking(p, None)?;
            let e = (!r.complete).then(|| "some flows did not complete".to_string());
            (CellReport::Compete(Box::new(r)), e)
        }
    })
}

pub fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let shown = args.scenario.display().to_string();
    let text =
        std::fs::read_to_string(&args.scenario).with_context(|| format!("reading {shown}"))?;
    let scenario = Scenario::parse(&text).with_context(|| shown.clone())?;
    let cells = scenario.cells().with_context(|| shown.clone())?;
    // Every cell is checked before the first one runs.
    let plans = cells
        .iter()
        .map(|c| {
            plan_for(c, scenario.metric()).with_context(|| format!("{shown}: cell {}", c.label()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    check_out_dir(&args.out)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let home = qbench_shaper::netns::current()?;
    let started = Instant::now();
    let (mut ran, mut failed, mut rows) = (0u32, Vec::new(), Vec::new());
    for (i, (cell, plan)) in cells.iter().zip(&plans).enumerate() {
        // Nobody reads on (`| head`): stop between cells; main ends as SIGPIPE would.
        if crate::console::closed() {
            return Ok(());
        }
        let path = cell_path(&args.out, cell);
        let what = cell.label();
        let done = read_cell(&path).filter(|f| f.cell.hash == cell.hash && f.report.complete());
        let report = match done {
            Some(mut f) => {
                crate::tell!("[{}/{}] {what}: done before, skipped", i + 1, cells.len());
                // A finished cell is judged by the metric the scenario names now.
                if let (CellReport::Compare(r), CellPlan::Compare(p)) = (&mut f.report, plan) {
                    if r.comparison.metric != p.metric {
                        r.comparison = Comparison::of(&r.a.runs, &r.b.runs, p.metric);
                        write_json(&Dest::File(path.clone()), &f)?;
                    }
                }
                f.report
            }
            None => {
                let eta = (ran > 0).then(|| {
                    let left = started.elapsed() / ran * (cells.len() - i) as u32;
                    humantime::format_duration(std::time::Duration::from_secs(left.as_secs()))
                        .to_string()
                });
                crate::tell!(
                    "[{}/{}] {what}{}",
                    i + 1,
                    cells.len(),
                    eta.map_or(String::new(), |e| format!(" (eta {e})"))
                );
                let result = run_cell(plan);
                qbench_shaper::netns::restore(&home)?;
                let (report, error) = result.with_context(|| format!("cell {what}"))?;
                if let Some(e) = error {
                    failed.push(format!("{what}: {e}"));
                }
                let file = CellFile::new(scenario.name.clone(), cell.clone(), report);
                write_json(&Dest::File(path), &file)?;
                ran += 1;
                file.report
            }
        };
        rows.push(row(&what, &report));
    }
    crate::say!(
        "sweep {}: {} cells ({ran} run, {} skipped) in {}",
        scenario.name,
        cells.len(),
        cells.len() as u32 - ran,
        humantime::format_duration(std::time::Duration::from_secs(started.elapsed().as_secs()))
    );
    crate::say!(
        "  {:<48} {:>8} {:>8} {:>10} better",
        "cell",
        "metric",
        "diff",
        "p"
    );
    for r in rows {
        crate::say!("{r}");
    }
    anyhow::ensure!(
        failed.is_empty(),
        "{} cell(s) incomplete: {}",
        failed.len(),
        failed.join("; ")
    );
    Ok(())
}
