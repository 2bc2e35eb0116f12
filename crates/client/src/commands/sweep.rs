//! `qbench sweep`: every cell of a scenario file, one JSON file per cell, written atomically,
//! skipped when a complete file with the same hash is already there.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use qbench_core::report::compare::{Comparison, Verdict};
use qbench_core::scenario::cell::{CellFile, CellFileError, CellReport};
use qbench_core::scenario::{Cell, CellSpec, Scenario};
use qbench_core::spec::input::{MAX_REPORT_BYTES, MAX_SCENARIO_BYTES};
use qbench_core::stats::discoveries;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;

use crate::export::live_outputs::Watching;
use crate::export::{write_json, Dest};
use crate::flags::cli::{Outputs, SweepArgs};
use qbench_engine::error::ConfigError;
use qbench_engine::plan::{LinkChoice, TargetArgs};

/// How a cell runs: its validated plan, built from the typed spec.
pub enum CellPlan {
    Compare(Box<qbench_engine::ComparePlan>),
    Compete(Box<qbench_engine::CompetePlan>),
}

/// `judge`: the scenario's metric, if it names one, and its test.
pub fn plan_for(cell: &Cell, judge: (Option<Metric>, Test)) -> anyhow::Result<CellPlan> {
    let (target, link) = (TargetArgs::default(), LinkChoice::default());
    Ok(match &cell.spec {
        CellSpec::Compare(s) => CellPlan::Compare(Box::new(qbench_engine::ComparePlan::new(
            s, judge, &target, link,
        )?)),
        CellSpec::Compete(s) => {
            CellPlan::Compete(Box::new(qbench_engine::CompetePlan::new(s, &target, link)?))
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
        let Ok(bytes) =
            qbench_engine::files::read_bytes(&e.path(), MAX_REPORT_BYTES, "a cell file")
        else {
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
    CellFile::from_slice(
        &qbench_engine::files::read_bytes(path, MAX_REPORT_BYTES, "a cell file").ok()?,
    )
    .ok()
}

/// One line of the summary; `fdr` is the cell's q-value and whether it is kept.
fn row(what: &str, report: &CellReport, fdr: Option<(f64, bool)>) -> String {
    match report {
        CellReport::Compare(r) => {
            let c = &r.comparison;
            let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:+.1}%"));
            let interval = c.effect.as_ref().map_or("-".into(), |e| {
                format!("[{}, {}]", pct(e.rel_low_pct), pct(e.rel_high_pct))
            });
            let better = match (c.verdict, &c.undecided) {
                (Verdict::AFaster, _) => r.label_a.clone(),
                (Verdict::BFaster, _) => r.label_b.clone(),
                (Verdict::Inconclusive, Some(why)) => format!("inconclusive: {}", why.short()),
                (Verdict::Inconclusive, None) => "inconclusive".into(),
            };
            let kept = match fdr {
                Some((_, false)) if c.verdict != Verdict::Inconclusive => " (not kept by FDR)",
                _ => "",
            };
            let warning = crate::export::text::notes::limited_runs(r)
                .map_or(String::new(), |w| format!(" (WARNING: {w})"));
            format!(
                "  {what:<40} {:>6} {:>8} {:>18} {:>9} {:>9} {better}{kept}{warning}",
                r.rounds,
                pct(c.effect.as_ref().and_then(|e| e.rel_pct)),
                interval,
                c.p.map_or("-".into(), |p| format!("{p:.2e}")),
                fdr.map_or("-".into(), |(q, _)| format!("{q:.2e}")),
            )
        }
        CellReport::Compete(r) => format!(
            "  {what:<48} Jain's index {}",
            r.jain_index.map_or("-".into(), |j| format!("{j:.3}"))
        ),
    }
}

/// Runs one cell; returns its report and, when incomplete, why.
fn run_cell(plan: &CellPlan, watching: &Watching) -> anyhow::Result<(CellReport, Option<String>)> {
    Ok(match plan {
        CellPlan::Compare(p) => {
            let out = crate::commands::compare::run(p, &Outputs::default(), watching)?;
            (CellReport::Compare(Box::new(out.report)), out.error)
        }
        CellPlan::Compete(p) => {
            let r = crate::commands::compete::run_blocking(p, None, watching)?;
            let e = (!r.complete).then(|| "some flows did not complete".to_string());
            (CellReport::Compete(Box::new(r)), e)
        }
    })
}

/// A scenario file's text, parsed, with the pages it names read from its directory.
pub fn load_scenario(path: &Path, text: &str) -> anyhow::Result<Scenario> {
    let shown = path.display().to_string();
    let mut scenario = Scenario::parse(text).with_context(|| shown.clone())?;
    let dir = path.parent().unwrap_or(Path::new("."));
    for page in scenario.page_paths() {
        let spec = crate::flags::apps::read_page(&dir.join(&page), &page)
            .map_err(|e| anyhow::anyhow!("{shown}: page: {e}"))?;
        scenario.pages.insert(page, spec);
    }
    Ok(scenario)
}

pub fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let (scenario, cells, plans) = read_scenario(&args.scenario)?;
    let mut warned = std::collections::BTreeSet::new();
    for p in &plans {
        if let CellPlan::Compare(c) = p {
            if let Some(w) = c.out_of_reach().filter(|w| warned.insert(w.clone())) {
                let field = match c.auto {
                    Some(_) => "max_rounds",
                    None => "rounds",
                };
                crate::tell!(
                    "warning: {}: {field} = {}: {w}",
                    args.scenario.display(),
                    c.rounds
                );
            }
        }
    }
    qbench_engine::error::out_dir(&args.out)?;
    check_out_dir(&args.out)?;
    let home = qbench_shaper::netns::current()?;
    // One for every cell: what is said once is said once in the whole sweep.
    let watching = Watching::default();
    let started = Instant::now();
    let (mut ran, mut failed, mut rows) = (0u32, Vec::new(), Vec::new());
    for (i, (cell, plan)) in cells.iter().zip(&plans).enumerate() {
        // Nobody reads on (`| head`): stop between cells; main ends as SIGPIPE would.
        if crate::console::closed() {
            return Ok(());
        }
        let path = cell_path(&args.out, cell);
        let what = cell.label();
        let report = match done_before(&path, cell) {
            Some(mut f) => {
                crate::tell!("[{}/{}] {what}: done before, skipped", i + 1, cells.len());
                rejudge(&mut f, plan, &path)?;
                f.report
            }
            None => {
                let eta = eta(started, ran, cells.len() - i);
                crate::tell!("[{}/{}] {what}{eta}", i + 1, cells.len());
                let (report, error) =
                    run_and_store(cell, plan, path, &scenario.name, &home, &watching)?;
                // The cell took the signal and wrote its report; the sweep ends with it.
                if let Some(sig) = qbench_engine::signals::first() {
                    let why = qbench_engine::signals::Interrupted::new(
                        sig,
                        format!("during cell {what}"),
                    );
                    anyhow::bail!(
                        "{why}; the cells finished before it are kept in {}: the same sweep \
                         again goes on from it",
                        args.out.display()
                    );
                }
                if let Some(e) = error {
                    failed.push(format!("{what}: {e}"));
                }
                ran += 1;
                report
            }
        };
        rows.push((what, report));
    }
    crate::say!(
        "sweep {}: {} cells ({ran} run, {} skipped) in {}",
        scenario.name,
        cells.len(),
        cells.len() as u32 - ran,
        humantime::format_duration(std::time::Duration::from_secs(started.elapsed().as_secs()))
    );
    print_table(&rows, args.fdr.level());
    anyhow::ensure!(
        failed.is_empty(),
        "{} cell(s) incomplete: {}",
        failed.len(),
        failed.join("; ")
    );
    Ok(())
}

/// The scenario, its cells, and a plan for each. What the scenario says is input: its errors
/// exit as bad input does, and every cell is checked before the first one runs.
fn read_scenario(path: &Path) -> anyhow::Result<(Scenario, Vec<Cell>, Vec<CellPlan>)> {
    let shown = path.display().to_string();
    let text = qbench_engine::files::read_text(path, MAX_SCENARIO_BYTES, "a scenario").map_err(
        |message| ConfigError {
            flag: "SCENARIO",
            message,
        },
    )?;
    let bad_scenario = |e: anyhow::Error| ConfigError {
        flag: "SCENARIO",
        message: format!("{e:#}"),
    };
    let scenario = load_scenario(path, &text).map_err(bad_scenario)?;
    let cells = scenario
        .cells()
        .with_context(|| shown.clone())
        .map_err(bad_scenario)?;
    let plans = cells
        .iter()
        .map(|c| {
            plan_for(c, (scenario.metric(), scenario.test()))
                .with_context(|| format!("{shown}: cell {}", c.label()))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(bad_scenario)?;
    Ok((scenario, cells, plans))
}

/// The cell's complete file from an earlier sweep. The stored hash is recomputed from the
/// stored spec: an edited spec is not the cell.
fn done_before(path: &Path, cell: &Cell) -> Option<CellFile> {
    read_cell(path).filter(|f| {
        f.cell.hash == cell.hash && f.cell.spec.hash() == cell.hash && f.report.complete()
    })
}

/// A finished cell is judged by the metric and test the scenario names now; its file is
/// rewritten when they changed.
fn rejudge(f: &mut CellFile, plan: &CellPlan, path: &Path) -> anyhow::Result<()> {
    if let (CellReport::Compare(r), CellPlan::Compare(p)) = (&mut f.report, plan) {
        if (r.comparison.metric, r.comparison.test) != (p.metric, p.test) {
            r.comparison = Comparison::of(&r.a.runs, &r.b.runs, p.metric, p.test);
            write_json(&Dest::File(path.to_path_buf()), f)?;
        }
    }
    Ok(())
}

/// ` (eta 1h 2m 3s)` for the `left` cells, at the pace of the `ran` run so far; empty
/// before the first.
fn eta(started: Instant, ran: u32, left: usize) -> String {
    if ran == 0 {
        return String::new();
    }
    let left = started.elapsed() / ran * left as u32;
    let eta = humantime::format_duration(std::time::Duration::from_secs(left.as_secs()));
    format!(" (eta {eta})")
}

/// Runs the cell and writes its file; returns its report and, when incomplete, why. The
/// network namespace is restored whatever the cell did: the next cell starts at home.
fn run_and_store(
    cell: &Cell,
    plan: &CellPlan,
    path: PathBuf,
    scenario: &str,
    home: &std::fs::File,
    watching: &Watching,
) -> anyhow::Result<(CellReport, Option<String>)> {
    let result = run_cell(plan, watching);
    qbench_shaper::netns::restore(home)?;
    let (report, error) = result.with_context(|| format!("cell {}", cell.label()))?;
    let file = CellFile::new(scenario.to_string(), cell.clone(), report);
    write_json(&Dest::File(path), &file)?;
    Ok((file.report, error))
}

/// One row per cell, with q-values over the compared cells when `fdr` sets a level.
fn print_table(rows: &[(String, CellReport)], fdr: Option<f64>) {
    let p: Vec<Option<f64>> = rows
        .iter()
        .map(|(_, r)| match r {
            CellReport::Compare(r) => r.comparison.p,
            CellReport::Compete(_) => None,
        })
        .collect();
    let q = match fdr {
        Some(level) => discoveries(&p, level),
        None => vec![None; rows.len()],
    };
    crate::say!(
        "  {:<40} {:>6} {:>8} {:>18} {:>9} {:>9} better",
        "cell",
        "rounds",
        "effect",
        "95% interval",
        "p",
        "q"
    );
    for ((what, report), q) in rows.iter().zip(q) {
        crate::say!("{}", row(what, report, q));
    }
    if let Some(level) = fdr {
        crate::say!(
            "  q: Benjamini-Hochberg over the {} compared cells; kept at q <= {level} (--no-fdr: each cell alone)",
            p.iter().flatten().count()
        );
    }
}
