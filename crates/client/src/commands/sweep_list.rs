//! `qbench sweep SCENARIO --dry-run`: each cell with what it compares and how long its
//! transfers take at the least, and nothing run.

use std::time::Duration;

use qbench_core::scenario::duration::cell_time;
use qbench_engine::{CellPlan, SweepPlan};

/// Rounded down, so that "at least" stays true: to the second, under 10 s to 100 ms.
fn time(d: Duration) -> String {
    let shown = match d.as_secs() {
        s if s >= 10 => Duration::from_secs(s),
        _ => Duration::from_millis(d.as_millis() as u64 / 100 * 100),
    };
    humantime::format_duration(shown).to_string()
}

/// What the cell runs: its two sides and rounds, or its flows.
fn what(plan: &CellPlan) -> (String, u32) {
    match plan {
        CellPlan::Compare(p) => {
            let rounds = match &p.auto {
                Some(a) => format!("{} to {} rounds (auto)", a.min, a.max),
                None => format!("{} rounds", p.rounds),
            };
            let warm = match p.warmup_rounds {
                0 => String::new(),
                n => format!(" after {n} warm-up"),
            };
            let (a, b) = &p.labels;
            (format!("{a} vs {b}, {rounds}{warm}"), p.warmup_rounds)
        }
        CellPlan::Compete(p) => {
            let flows: Vec<&str> = p.flows.iter().map(|(l, _)| l.as_str()).collect();
            (
                format!("{} at once over {}", flows.join(", "), p.link_text),
                0,
            )
        }
    }
}

/// Prints the cells and the sweep's least time.
pub(super) fn print(plan: &SweepPlan) {
    let of = plan.cells.len();
    let (mut least, mut most, mut unbounded) = (Duration::ZERO, Duration::ZERO, 0);
    let mut lines = Vec::with_capacity(of);
    for (i, (cell, p)) in plan.cells.iter().enumerate() {
        let (what, warmup) = what(p);
        let took = match cell_time(&cell.spec, warmup) {
            Some((lo, hi)) => {
                least = least.saturating_add(lo);
                most = most.saturating_add(hi);
                match lo == hi {
                    true => format!("at least {}", time(lo)),
                    false => format!("at least {} to {}", time(lo), time(hi)),
                }
            }
            None => {
                unbounded += 1;
                "no rate bounds it: this machine's speed decides".to_string()
            }
        };
        let label = match cell.label() {
            l if l.is_empty() => "(the base)".to_string(),
            l => l,
        };
        lines.push(format!("[{}/{of}] {label}: {what}; {took}", i + 1));
    }
    let total = match (least == most, unbounded) {
        (_, n) if n == of => "no cell has a rate that bounds its time".to_string(),
        (true, 0) => format!("at least {} of transfers", time(least)),
        (false, 0) => format!("at least {} to {} of transfers", time(least), time(most)),
        (_, n) => format!(
            "at least {} of transfers in the cells with a rate, {n} more unbounded",
            time(least)
        ),
    };
    crate::say!(
        "sweep {}: {of} cells, {total} (link setup, calibration and a client slower than the link come on top); nothing run",
        plan.name
    );
    for l in lines {
        crate::say!("  {l}");
    }
}
