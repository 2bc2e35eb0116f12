//! `qbench sweep`: every cell of a scenario, each run as `compare` or `compete` runs it, its
//! report kept in a file of its own (written atomically) in the sweep's directory. A cell
//! whose complete file with the same hash is already there is not run again, only judged by
//! the metric and test the scenario names now; a signal ends the sweep after the cell it
//! came in, which still keeps its report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use qbench_core::report::compare::Comparison;
use qbench_core::scenario::cell::{CellFile, CellFileError, CellReport};
use qbench_core::scenario::{Cell, CellSpec, Scenario};
use qbench_core::spec::input::MAX_REPORT_BYTES;

use super::compare::{compare, ComparePlan};
use super::compete::{compete, CompetePlan};
use crate::error::out_dir;
use crate::observe::Observing;
use crate::plan::{LinkChoice, TargetArgs};
use crate::setup::input::read_bytes;
use crate::signals::{self, Interrupted};

/// How a cell runs: its validated plan, built from the cell's typed spec.
pub enum CellPlan {
    Compare(Box<ComparePlan>),
    Compete(Box<CompetePlan>),
}

/// A scenario's cells, each with its plan, and the directory their files go to.
pub struct SweepPlan {
    /// The scenario's name, kept in every cell file.
    pub name: String,
    pub cells: Vec<(Cell, CellPlan)>,
    pub out: PathBuf,
}

impl SweepPlan {
    /// Plans every cell of `scenario` before any runs; an error names the cell it is in.
    /// `command`: the command line each cell's report records.
    pub fn new(scenario: &Scenario, out: PathBuf, command: &[String]) -> anyhow::Result<Self> {
        let judge = (scenario.metric(), scenario.test());
        let (target, link) = (TargetArgs::default(), LinkChoice::default());
        let cells = scenario
            .cells()?
            .into_iter()
            .map(|cell| {
                let plan = match &cell.spec {
                    CellSpec::Compare(s) => {
                        ComparePlan::new(s, judge, &target, link).map(|mut p| {
                            p.command = command.to_vec();
                            CellPlan::Compare(Box::new(p))
                        })
                    }
                    CellSpec::Compete(s) => CompetePlan::new(s, &target, link).map(|mut p| {
                        p.command = command.to_vec();
                        CellPlan::Compete(Box::new(p))
                    }),
                }
                .with_context(|| format!("cell {}", cell.label()))?;
                Ok((cell, plan))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            name: scenario.name.clone(),
            cells,
            out,
        })
    }

    fn path(&self, cell: &Cell) -> PathBuf {
        self.out.join(format!("cell-{}.json", &cell.hash[..16]))
    }
}

/// Where a sweep is, cell by cell (`index` from 0, of `of`).
#[derive(Debug, Clone, Copy)]
pub enum CellStage<'a> {
    /// The cell's complete file was there: it is judged again, not run.
    DoneBefore {
        index: usize,
        of: usize,
        label: &'a str,
    },
    /// The cell runs now; `eta`: the cells left at the pace of those run so far.
    Running {
        index: usize,
        of: usize,
        label: &'a str,
        eta: Option<Duration>,
    },
}

/// What a sweep shows and writes as it goes.
pub trait SweepPresenter {
    /// Whether to start the next cell: not when nobody reads what the sweep prints.
    fn go_on(&self) -> bool {
        true
    }
    fn stage(&self, _s: CellStage<'_>) {}
    /// The handle one cell's comparison or competition is run with.
    fn observing(&self, cell: &CellPlan) -> Observing;
    /// A cell that ran, with its report (kept by then).
    fn ran(&self, _cell: &CellPlan, _report: &CellReport) {}
    /// Writes a cell's file at `path`, replacing what is there.
    fn keep(&self, path: &Path, file: &CellFile) -> anyhow::Result<()>;
}

/// How a sweep ended, unless an error or a signal ended it.
pub struct SweepOutcome {
    /// Every cell's label and report, in the scenario's order.
    pub rows: Vec<(String, CellReport)>,
    /// Cells run now (the rest were done before).
    pub ran: u32,
    /// The cells that ran incomplete, each with why.
    pub failed: Vec<String>,
    pub elapsed: Duration,
    /// `false` when the presenter said not to go on: the rows stop there.
    pub finished: bool,
}

/// Runs every cell of `plan` not done before, each in the network namespace the sweep began
/// in, and hands each report to `show` to keep.
pub fn sweep(plan: &SweepPlan, show: &dyn SweepPresenter) -> anyhow::Result<SweepOutcome> {
    out_dir(&plan.out)?;
    check_out_dir(&plan.out)?;
    let home = qbench_shaper::netns::current()?;
    let started = Instant::now();
    let of = plan.cells.len();
    let mut outcome = SweepOutcome {
        rows: Vec::new(),
        ran: 0,
        failed: Vec::new(),
        elapsed: Duration::ZERO,
        finished: false,
    };
    for (index, (cell, cell_plan)) in plan.cells.iter().enumerate() {
        if !show.go_on() {
            outcome.elapsed = started.elapsed();
            return Ok(outcome);
        }
        let path = plan.path(cell);
        let label = cell.label();
        let report = if let Some(mut f) = done_before(&path, cell) {
            show.stage(CellStage::DoneBefore {
                index,
                of,
                label: &label,
            });
            if rejudge(&mut f, cell_plan) {
                show.keep(&path, &f)?;
            }
            f.report
        } else {
            let eta =
                (outcome.ran > 0).then(|| started.elapsed() / outcome.ran * (of - index) as u32);
            show.stage(CellStage::Running {
                index,
                of,
                label: &label,
                eta,
            });
            let result = run_cell(cell_plan, show);
            // Whatever the cell did, the next one starts in the sweep's namespace.
            qbench_shaper::netns::restore(&home)?;
            let (report, error) = result.with_context(|| format!("cell {label}"))?;
            let file = CellFile::new(plan.name.clone(), cell.clone(), report);
            show.keep(&path, &file)?;
            show.ran(cell_plan, &file.report);
            // The cell took the signal and kept its report; the sweep ends with it.
            if let Some(sig) = signals::first() {
                let why = Interrupted::new(sig, format!("during cell {label}"));
                anyhow::bail!(
                    "{why}; the cells finished before it are kept in {}: the same sweep \
                     again goes on from it",
                    plan.out.display()
                );
            }
            if let Some(e) = error {
                outcome.failed.push(format!("{label}: {e}"));
            }
            outcome.ran += 1;
            file.report
        };
        outcome.rows.push((label, report));
    }
    outcome.elapsed = started.elapsed();
    outcome.finished = true;
    Ok(outcome)
}

/// Runs one cell; returns its report and, when incomplete, why.
fn run_cell(
    plan: &CellPlan,
    show: &dyn SweepPresenter,
) -> anyhow::Result<(CellReport, Option<String>)> {
    let observing = show.observing(plan);
    Ok(match plan {
        CellPlan::Compare(p) => {
            let out = compare(p, &observing)?;
            (CellReport::Compare(Box::new(out.report)), out.error)
        }
        CellPlan::Compete(p) => {
            let r = compete(p, &observing)?;
            let e = (!r.complete).then(|| "some flows did not complete".to_string());
            (CellReport::Compete(Box::new(r)), e)
        }
    })
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
        let Ok(bytes) = read_bytes(&e.path(), MAX_REPORT_BYTES, "a cell file") else {
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

/// The cell's complete file from an earlier sweep. The stored hash is recomputed from the
/// stored spec: an edited spec is not the cell.
fn done_before(path: &Path, cell: &Cell) -> Option<CellFile> {
    let bytes = read_bytes(path, MAX_REPORT_BYTES, "a cell file").ok()?;
    CellFile::from_slice(&bytes).ok().filter(|f| {
        f.cell.hash == cell.hash && f.cell.spec.hash() == cell.hash && f.report.complete()
    })
}

/// Judges a finished cell by the metric and test the scenario names now; whether that
/// changed its report.
fn rejudge(f: &mut CellFile, plan: &CellPlan) -> bool {
    if let (CellReport::Compare(r), CellPlan::Compare(p)) = (&mut f.report, plan) {
        if (r.comparison.metric, r.comparison.test) != (p.metric, p.test) {
            r.comparison = Comparison::of(&r.a.runs, &r.b.runs, p.metric, p.test);
            return true;
        }
    }
    false
}
