//! `qbench compare`: two configurations, back to back, round after round, from their plan to
//! the comparison's report. Its plan is in `compare_plan.rs`, its rounds in `rounds.rs`.

use std::sync::atomic::AtomicBool;

use qbench_core::report::compare::CompareReport;

pub use super::compare_plan::{ComparePlan, DEFAULT_WARMUP_ROUNDS};
use super::rounds::run_rounds;
use super::side::Side;
use crate::measure::clock::Clock;
use crate::observe::{Document, Observing, Presenter, Written};
use crate::setup::harness::{late_signal, lifecycle};
use crate::setup::prepare::Prepared;
use crate::signals::{self, Interrupted};

/// How a comparison ended, when no signal ended it before its rounds.
#[derive(Debug)]
pub struct CompareOutcome {
    pub report: CompareReport,
    /// Why it is incomplete: what stopped the rounds, else a side's first error.
    pub error: Option<String>,
}

/// Builds the link and servers, runs the rounds, and tears it all down, telling `observer`
/// what happens and handing it the report to show and write; SIGINT, SIGTERM and SIGHUP
/// stop it cleanly, the report saying so.
pub fn compare(plan: &ComparePlan, observer: &Observing) -> anyhow::Result<CompareOutcome> {
    // Once rounds started, the round loop takes a stopping signal and still writes the report.
    let threads = plan.a.spec().client_threads;
    let mut outcome = lifecycle(
        &[&plan.a, &plan.b],
        threads,
        observer,
        async |prepared, started| rounds_of(plan, prepared, started).await,
    )?;
    if let Err(late) = late_signal() {
        // The report says so too: a Ctrl-C is never ignored, whenever it came.
        let report = &mut outcome.report;
        if report.aborted.is_none() {
            report.aborted = Some(late.to_string());
            report.complete = false;
            observer.report(Written::Amended, Document::Compare(report))?;
        }
        outcome.error = Some(late.to_string());
        return Ok(outcome);
    }
    let judged = qbench_core::report::thresholds::failed_line(&outcome.report.thresholds);
    if outcome.error.is_none() && judged.is_none() {
        crate::output::lost::check_key_log(observer, plan.a.key_log.as_deref());
    }
    Ok(outcome)
}

/// Runs the rounds; the error is the first one when a side had incomplete runs.
async fn rounds_of(
    plan: &ComparePlan,
    prepared: &Prepared,
    rounds_started: &AtomicBool,
) -> anyhow::Result<CompareOutcome> {
    let observer = &prepared.observer;
    let (mut a, mut b) = open_sides(plan, prepared).await?;
    let (a_at, b_at) = (a.peer.origin.authority(), b.peer.origin.authority());
    let started = [a.started(&plan.a, &a_at), b.started(&plan.b, &b_at)];
    observer.started(&started).await?;
    let mut rounds = run_rounds(plan, &mut a, &mut b, observer, rounds_started).await?;
    observer.ended();
    a.finish().await;
    b.finish().await;
    // A signal after the rounds is reported as one during them is.
    let late = |when: &str| signals::take().map(|sig| Interrupted::new(sig, when).to_string());
    if rounds.aborted.is_none() {
        rounds.aborted = late("after the last round");
    }
    let mut report = rounds.report(plan, &a, &b)?;
    observer.report(Written::Final, Document::Compare(&report))?;
    if rounds.aborted.is_none() {
        if let Some(why) = late("while the report was written") {
            rounds.aborted = Some(why);
            report = rounds.report(plan, &a, &b)?;
            observer.report(Written::Amended, Document::Compare(&report))?;
        }
    }
    let error = (!report.complete).then(|| {
        if let Some(why) = &report.aborted {
            return why.clone();
        }
        a.first_error()
            .map(|e| format!("A: {e}"))
            .or_else(|| b.first_error().map(|e| format!("B: {e}")))
            .unwrap_or_else(|| "incomplete rounds".into())
    });
    Ok(CompareOutcome { report, error })
}

/// Both sides, connected, on one clock.
async fn open_sides<'a>(
    plan: &'a ComparePlan,
    prepared: &'a Prepared,
) -> anyhow::Result<(Side<'a>, Side<'a>)> {
    let clock = Clock::start();
    let server = |i: usize| prepared.servers.get(i).and_then(Option::as_ref);
    prepared.prime_tcp_metrics(&[&plan.a, &plan.b]).await?;
    let command = plan.command.clone();
    let mut a = Side::open(&plan.a, server(0), prepared, command.clone(), clock).await?;
    let mut b = Side::open(&plan.b, server(1), prepared, command, clock).await?;
    a.steal_threshold = plan.steal_threshold;
    b.steal_threshold = plan.steal_threshold;
    Ok((a, b))
}
