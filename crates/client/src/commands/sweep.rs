//! `qbench sweep`: every cell of a scenario file, one JSON file per cell, written atomically,
//! skipped when a complete file with the same hash is already there.

use std::path::{Path, PathBuf};

use anyhow::Context;
use qbench_core::report::compare::Verdict;
use qbench_core::scenario::cell::{CellFile, CellReport};
use qbench_core::scenario::Scenario;
use qbench_core::spec::input::MAX_SCENARIO_BYTES;
use qbench_core::stats::discoveries;
use qbench_engine::observe::Observing;
use qbench_engine::{CellPlan, CellStage, SweepPlan, SweepPresenter};

use crate::export::live_outputs::Watching;
use crate::export::{print_text, write_json, Dest};
use crate::flags::cli::Outputs;
use crate::flags::sweep::SweepArgs;
use qbench_engine::error::ConfigError;

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

/// `qbench sweep SCENARIO --out DIR`: the engine runs the cells; this says where it is,
/// keeps each cell's file and prints the table.
pub fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let Some(out) = args.out.clone().filter(|_| !args.dry_run) else {
        let plan = read_scenario(&args.scenario, PathBuf::new())?;
        super::sweep_list::print(&plan);
        return Ok(());
    };
    let plan = read_scenario(&args.scenario, out)?;
    let mut warned = std::collections::BTreeSet::new();
    for (_, p) in &plan.cells {
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
    // One for every cell: what is said once is said once in the whole sweep.
    let shown = SweepShown {
        watching: Watching::default(),
    };
    let out = qbench_engine::sweep(&plan, &shown)?;
    // Nobody reads on (`| head`): main ends as SIGPIPE would.
    if !out.finished {
        return Ok(());
    }
    let cells = plan.cells.len();
    crate::say!(
        "sweep {}: {cells} cells ({} run, {} skipped) in {}",
        plan.name,
        out.ran,
        cells as u32 - out.ran,
        humantime::format_duration(std::time::Duration::from_secs(out.elapsed.as_secs()))
    );
    print_table(&out.rows, args.fdr.level());
    anyhow::ensure!(
        out.failed.is_empty(),
        "{} cell(s) incomplete: {}",
        out.failed.len(),
        out.failed.join("; ")
    );
    Ok(())
}

/// The sweep on the terminal: a line per cell, each cell's bar and table (a competition's
/// summary), and each cell's file written as `--json` files are.
struct SweepShown {
    watching: Watching,
}

impl SweepPresenter for SweepShown {
    fn go_on(&self) -> bool {
        !crate::console::closed()
    }

    fn stage(&self, s: CellStage<'_>) {
        match s {
            CellStage::DoneBefore { index, of, label } => {
                crate::tell!("[{}/{of}] {label}: done before, skipped", index + 1);
            }
            CellStage::Running {
                index,
                of,
                label,
                eta,
            } => {
                let eta = eta.map_or(String::new(), |left| {
                    let left = std::time::Duration::from_secs(left.as_secs());
                    format!(" (eta {})", humantime::format_duration(left))
                });
                crate::tell!("[{}/{of}] {label}{eta}", index + 1);
            }
        }
    }

    fn observing(&self, cell: &CellPlan) -> Observing {
        match cell {
            CellPlan::Compare(p) => {
                super::compare::observing(p, &Outputs::default(), &self.watching)
            }
            CellPlan::Compete(_) => super::compete::observing(&self.watching),
        }
    }

    fn ran(&self, cell: &CellPlan, report: &CellReport) {
        if let (CellPlan::Compete(p), CellReport::Compete(r)) = (cell, report) {
            print_text(&super::compete::summary(p, r), None);
        }
    }

    fn keep(&self, path: &Path, file: &CellFile) -> anyhow::Result<()> {
        write_json(&Dest::File(path.to_path_buf()), file)
    }
}

/// The scenario and a plan for each of its cells. What the scenario says is input: its
/// errors exit as bad input does, and every cell is checked before the first one runs.
fn read_scenario(path: &Path, out: PathBuf) -> anyhow::Result<SweepPlan> {
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
    let command: Vec<String> = std::env::args().collect();
    Ok(SweepPlan::new(&scenario, out, &command)
        .with_context(|| shown.clone())
        .map_err(bad_scenario)?)
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
