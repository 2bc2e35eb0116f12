//! `qbench sweep`: every cell of a scenario file as a `qbench compare`, one JSON per cell,
//! written atomically, skipped when a complete file with the same hash is already there.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use qbench_core::compare::{CompareReport, Verdict};
use qbench_core::scenario::{Cell, Scenario};
use serde::{Deserialize, Serialize};

use crate::cli::{Cli, Command, CompeteArgs, SweepArgs};
use crate::compare::{run_blocking, Plan};
use crate::compete::CompeteReport;

pub const SCHEMA: &str = "qbench.sweep-cell";

#[derive(Debug, Serialize, Deserialize)]
pub struct CellFile {
    pub schema: String,
    pub scenario: String,
    pub cell: Cell,
    /// A `qbench.compare-report` or a `qbench.compete-report`, by `cell.command`.
    pub report: serde_json::Value,
}

impl CellFile {
    pub fn comparison(&self) -> Option<CompareReport> {
        serde_json::from_value(self.report.clone()).ok()
    }

    pub fn competition(&self) -> Option<CompeteReport> {
        serde_json::from_value(self.report.clone()).ok()
    }

    fn complete(&self) -> bool {
        self.report.get("complete") == Some(&serde_json::Value::Bool(true))
    }
}

/// How a cell runs.
pub enum CellPlan {
    Compare(Box<Plan>),
    Compete(Box<CompeteArgs>),
}

fn cell_path(out: &Path, cell: &Cell) -> PathBuf {
    out.join(format!("cell-{}.json", &cell.hash[..16]))
}

fn finished(path: &Path, cell: &Cell) -> bool {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<CellFile>(&b).ok())
        .is_some_and(|f| f.cell.hash == cell.hash && f.complete())
}

pub fn plan_for(cell: &Cell) -> anyhow::Result<CellPlan> {
    let argv = ["qbench", cell.command.as_str()]
        .into_iter()
        .map(String::from)
        .chain(cell.args.iter().cloned());
    let cli = Cli::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().lines().next().unwrap_or("")))?;
    match cli.command {
        Some(Command::Compare(c)) => Ok(CellPlan::Compare(Box::new(Plan::from_args(*c)?))),
        Some(Command::Compete(c)) => {
            anyhow::ensure!(
                c.run.link.is_some(),
                "--link: flows compete for an emulated bottleneck; give one"
            );
            Ok(CellPlan::Compete(c))
        }
        _ => anyhow::bail!("cells run `compare` or `compete`"),
    }
}

fn label(cell: &Cell) -> String {
    cell.params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn write_atomic(path: &Path, f: &CellFile) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(f)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))
}

pub fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.scenario)
        .with_context(|| format!("reading {}", args.scenario.display()))?;
    let scenario = Scenario::parse(&text).with_context(|| args.scenario.display().to_string())?;
    let cells = scenario
        .cells()
        .with_context(|| args.scenario.display().to_string())?;
    // Every cell is checked before the first one runs.
    let plans = cells
        .iter()
        .map(|c| {
            plan_for(c).with_context(|| format!("{}: cell {}", args.scenario.display(), label(c)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let home = qbench_shaper::netns::current()?;
    let started = Instant::now();
    let (mut ran, mut failed) = (0u32, Vec::new());
    let mut rows = Vec::new();
    for (i, (cell, plan)) in cells.iter().zip(&plans).enumerate() {
        let path = cell_path(&args.out, cell);
        let what = label(cell);
        if finished(&path, cell) {
            eprintln!("[{}/{}] {what}: done before, skipped", i + 1, cells.len());
        } else {
            let eta = (ran > 0).then(|| {
                let left = started.elapsed() / ran * (cells.len() - i) as u32;
                humantime::format_duration(std::time::Duration::from_secs(left.as_secs()))
                    .to_string()
            });
            eprintln!(
                "[{}/{}] {what}{}",
                i + 1,
                cells.len(),
                eta.map_or(String::new(), |e| format!(" (eta {e})"))
            );
            let result = match plan {
                CellPlan::Compare(p) => run_blocking(p, std::env::args().collect())
                    .and_then(|(r, e)| Ok((serde_json::to_value(r)?, e))),
                CellPlan::Compete(c) => {
                    crate::compete::run_blocking(clone_compete(c)).and_then(|r| {
                        let e = (!r.complete).then(|| "some flows did not complete".to_string());
                        Ok((serde_json::to_value(r)?, e))
                    })
                }
            };
            qbench_shaper::netns::restore(&home)?;
            let (report, error) = result.with_context(|| format!("cell {what}"))?;
            if let Some(e) = error {
                failed.push(format!("{what}: {e}"));
            }
            write_atomic(
                &path,
                &CellFile {
                    schema: SCHEMA.into(),
                    scenario: scenario.name.clone(),
                    cell: cell.clone(),
                    report,
                },
            )?;
            ran += 1;
        }
        let file = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<CellFile>(&b).ok());
        if let Some(r) = file.as_ref().and_then(CellFile::comparison) {
            let c = &r.comparison;
            rows.push(format!(
                "  {what:<48} {:>8} {:>10} {}",
                c.plt_diff_pct.map_or("-".into(), |d| format!("{d:+.1}%")),
                c.welch
                    .as_ref()
                    .map_or("-".into(), |w| format!("{:.2e}", w.p)),
                match c.verdict {
                    Verdict::AFaster => r.label_a.as_str(),
                    Verdict::BFaster => r.label_b.as_str(),
                    Verdict::Inconclusive => "inconclusive",
                }
            ));
        } else if let Some(r) = file.as_ref().and_then(CellFile::competition) {
            rows.push(format!(
                "  {what:<48} Jain's index {}",
                r.jain_index.map_or("-".into(), |j| format!("{j:.3}"))
            ));
        }
    }
    println!(
        "sweep {}: {} cells ({ran} run, {} skipped) in {}",
        scenario.name,
        cells.len(),
        cells.len() as u32 - ran,
        humantime::format_duration(std::time::Duration::from_secs(started.elapsed().as_secs()))
    );
    println!("  {:<48} {:>8} {:>10} faster", "cell", "PLT diff", "p");
    for r in rows {
        println!("{r}");
    }
    anyhow::ensure!(
        failed.is_empty(),
        "{} cell(s) incomplete: {}",
        failed.len(),
        failed.join("; ")
    );
    Ok(())
}

/// Compete arguments are consumed by a run; a sweep keeps its validated copy.
fn clone_compete(c: &CompeteArgs) -> CompeteArgs {
    CompeteArgs {
        run: c.run.clone(),
        flows: c.flows.clone(),
    }
}
