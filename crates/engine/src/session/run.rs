//! `qbench`'s one configuration, `--runs` times: the lifecycle of a benchmark from its plan to
//! its report. Where a stopping signal ends it, whenever it comes, is decided here: before
//! the side is open (a report of no runs), during a run (a held load ends its run, any other
//! is dropped), between runs, while the report is written, and while tearing down.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use qbench_core::report::thresholds::{failed_line, judge};
use qbench_core::spec::threshold::Threshold;
use qbench_core::{ErrorKind, Recorder, Report, ReportMeta};

use super::early_stop::Judged;
use super::meta::report_meta;
use super::side::Side;
use crate::drive::runner::abort_reason;
use crate::measure::clock::Clock;
use crate::observe::{Document, Observer, Observing, Presenter, Written};
use crate::plan::config::Config;
use crate::setup::fleet::Barrier;
use crate::setup::harness::{late_signal, lifecycle};
use crate::setup::prepare::{peer, Prepared};
use crate::signals::{self, Interrupted};

/// A benchmark, validated: what `run` needs besides an observer.
#[derive(Debug)]
pub struct RunPlan {
    pub cfg: Config,
    /// The command line, as the report records it.
    pub command: Vec<String>,
    /// `--shard auto/N`: the launcher variable that named the index.
    pub shard_source: Option<&'static str>,
    /// `--start-at`, resolved.
    pub barrier: Option<Barrier>,
    /// `--fail-if`, judged on the report.
    pub thresholds: Vec<Threshold>,
    /// `--fail-early`: the conditions are judged interval by interval too.
    pub fail_early: bool,
    /// `--log-requests`.
    pub log_requests: Option<PathBuf>,
}

/// How a benchmark ended, when no signal ended it.
#[derive(Debug)]
pub struct RunOutcome {
    /// The final report, once the runs began.
    pub report: Option<Report>,
    /// Why the report is incomplete: a run's first error, or what stopped it.
    pub error: Option<String>,
    /// The `--fail-if` conditions the report met (or that stopped it early), as one line.
    pub thresholds_failed: Option<String>,
}

/// Builds the link and server, runs `plan` `--runs` times and tears everything down, telling
/// `observer` what happens and handing it each report to write. SIGINT, SIGTERM and SIGHUP
/// end it with the report so far and an [`Interrupted`] error.
pub fn run(plan: &RunPlan, observer: &Observing) -> anyhow::Result<RunOutcome> {
    // From here a stopping signal is counted, never lost: before the link exists too.
    signals::hold()?;
    let judged = Judged::new(observer.clone(), &plan.thresholds, plan.fail_early);
    let judge = judged.clone();
    let observer = observer.judging(std::sync::Arc::new(move |r| judge.judge(r)));
    let cfg = &plan.cfg;
    let outcome = lifecycle(
        &[cfg],
        cfg.spec().client_threads,
        &observer,
        async |prepared, takes_signals| benchmark(plan, prepared, &judged, takes_signals).await,
    );
    let mut outcome = match outcome {
        Err(e) => match e.downcast_ref::<Interrupted>() {
            // Stopped before any run began: the report says so.
            Some(i) if i.before_work => {
                let meta = report_meta(cfg, plan.command.clone());
                let report = before_any_run(meta, cfg, None, i.to_string())?;
                observer.report(Written::Unstarted, Document::Run(&report))?;
                return Err(e);
            }
            _ => return Err(e),
        },
        Ok(o) => o,
    };
    if let Err(late) = late_signal() {
        // The report says so too: a Ctrl-C is never ignored, whenever it came. A run that
        // had already failed keeps its own reason.
        if let Some(report) = outcome.report.as_mut() {
            if report.aborted.is_none() {
                report.aborted = Some(late.to_string());
                report.complete = false;
                observer.report(Written::Amended, Document::Run(report))?;
            }
        }
        return Err(late.into());
    }
    if outcome.error.is_none() && outcome.thresholds_failed.is_none() {
        crate::output::lost::check_key_log(&observer, cfg.key_log.as_deref());
    }
    Ok(outcome)
}

/// A report of a run that ended before its first connection: nothing was fetched, and the
/// one error (`kind: message`) or the stopping signal says why.
fn before_any_run(
    meta: ReportMeta,
    cfg: &Config,
    error: Option<(ErrorKind, &str)>,
    why: String,
) -> anyhow::Result<Report> {
    let mut rec = Recorder::new(0, cfg.run.total_objects, Duration::ZERO);
    if let Some((kind, message)) = error {
        rec.error(kind, message);
    }
    let run = rec.finish(Duration::ZERO);
    let expected = cfg.spec().runs as usize;
    Ok(Report::new(meta, vec![run], expected, Some(why))?)
}

/// The outcome of a benchmark that ended before its first run, with `report` written.
fn unstarted(observer: &Observing, report: Report) -> anyhow::Result<RunOutcome> {
    observer.report(Written::Unstarted, Document::Run(&report))?;
    Ok(RunOutcome {
        report: None,
        error: report.aborted,
        thresholds_failed: None,
    })
}

/// The runs and their report. The first stopping signal, whenever it comes from here on
/// (connecting, between runs, while the report is written), ends in a report with `aborted`
/// naming it, and a non-zero exit.
async fn benchmark(
    plan: &RunPlan,
    prepared: &Prepared,
    judged: &Judged,
    takes_signals: &AtomicBool,
) -> anyhow::Result<RunOutcome> {
    takes_signals.store(true, Ordering::SeqCst);
    let observer = &prepared.observer;
    let cfg = &plan.cfg;
    let mut listener = signals::Listener::new();
    let meta = report_meta(cfg, plan.command.clone());
    // Connecting may take up to --timeout, and a barrier until its time: a signal cuts both.
    let opened = tokio::select! {
        r = open_side(plan, meta.clone(), prepared) => r?,
        sig = listener.next() => {
            let why = Interrupted::new(sig, "before run 0").to_string();
            Err(before_any_run(meta, cfg, None, why)?)
        }
    };
    let mut side = match opened {
        Ok(side) => side,
        // Its `aborted` is the one error, as `kind: message`, or the signal.
        Err(report) => return unstarted(observer, report),
    };
    judged.stops(side.stopper());
    let authority = side.peer.origin.authority();
    observer.started(&[side.started(cfg, &authority)]).await?;
    let mut aborted = None;
    if let Some(b) = &plan.barrier {
        tokio::select! {
            at = crate::setup::fleet::wait(b, observer) => side.start = Some(at),
            sig = listener.next() => aborted = Some(Interrupted::new(sig, "before run 0").to_string()),
        }
    }
    if aborted.is_none() {
        aborted = run_all(plan, &mut side, observer, judged, &mut listener).await?;
    }
    observer.ended();
    side.finish().await;
    reported(plan, &side, observer, judged, aborted).await
}

/// The final report, shown and written, and how the benchmark ended: a signal from here on
/// is recorded in it.
async fn reported(
    plan: &RunPlan,
    side: &Side<'_>,
    observer: &Observing,
    judged: &Judged,
    aborted: Option<String>,
) -> anyhow::Result<RunOutcome> {
    let expected = plan.cfg.spec().runs as usize;
    let last = |when: &str| signals::take().map(|sig| Interrupted::new(sig, when).to_string());
    let aborted = aborted.or_else(|| last("after the last run"));
    let mut report = judged_by(side.report(expected, aborted)?, &plan.thresholds);
    // The summary is shown first: if writing fails, the numbers were at least shown.
    let written = observer.report(Written::Final, Document::Run(&report));
    if report.aborted.is_none() {
        if let Some(why) = last("while the report was written") {
            // The report says so; an output the signal cut short (a FIFO with no reader
            // yet) is named, and the signal is what the command ends with.
            report = judged_by(side.report(expected, Some(why))?, &plan.thresholds);
            observer.report(Written::Amended, Document::Run(&report))?;
            if let Err(e) = &written {
                observer.warn(&format!("warning: {e:#}"));
            }
            return Ok(RunOutcome {
                report: None,
                error: report.aborted,
                thresholds_failed: None,
            });
        }
    }
    written?;
    observer.settle().await;
    // Stopped by --fail-early: the conditions failed the command, not the stop they caused;
    // what held when it stopped is named if the final figures no longer say so.
    let early = judged.tripped();
    let error = failure(&report, side, expected).filter(|_| early.is_none());
    Ok(RunOutcome {
        thresholds_failed: failed_line(&report.thresholds).or(early),
        error,
        report: Some(report),
    })
}

/// The side, connected to its peer; or, when the peer cannot be reached, the report of a run
/// that ended there.
async fn open_side<'a>(
    plan: &'a RunPlan,
    meta: ReportMeta,
    prepared: &'a Prepared,
) -> anyhow::Result<Result<Side<'a>, Report>> {
    let cfg = &plan.cfg;
    let server = prepared.servers.first().and_then(Option::as_ref);
    let peer = match peer(cfg, server, prepared).await? {
        Ok(p) => p,
        Err(e) => {
            let why = format!("{}: {}", e.kind, e.message);
            let error = Some((e.kind, e.message.as_str()));
            return Ok(Err(before_any_run(meta, cfg, error, why)?));
        }
    };
    prepared.prime_tcp_metrics(&[cfg]).await?;
    let mut side = Side::new(cfg, server, prepared, peer, meta, Clock::start())?;
    side.shard = crate::setup::fleet::record(cfg, plan.shard_source);
    if let Some(path) = &plan.log_requests {
        side.log_requests(crate::drive::reqlog::RequestLog::create(path)?);
    }
    Ok(Ok(side))
}

/// Each run in turn until they are done, a signal stops them, a run reaches no peer or
/// `--fail-early` trips: what ended them early, if anything did.
async fn run_all(
    plan: &RunPlan,
    side: &mut Side<'_>,
    observer: &Observing,
    judged: &Judged,
    listener: &mut signals::Listener,
) -> anyhow::Result<Option<String>> {
    let spec = plan.cfg.spec();
    let expected = spec.runs as usize;
    let mut aborted = None;
    let stop = side.stopper();
    let fixed_stop = side.stops_fixed_runs();
    // The signal that stopped a held load, whose run still ends and is reported.
    let mut stopped_by = None;
    for i in 0..spec.runs {
        // One that came while the last run's report was written.
        if let Some(sig) = signals::take() {
            aborted = Some(Interrupted::new(sig, format!("before run {i}")).to_string());
            break;
        }
        let interrupted = |sig: i32| Interrupted::new(sig, format!("during run {i}")).to_string();
        // A held load, and qbench's own run of fixed objects (a page's and a video's too),
        // once its requests began, stop starting requests at a stopping signal and end with
        // those in flight, so the run so far is reported; any other run (a third-party
        // client's, one still connecting) is dropped at once, as is any run at a second
        // signal.
        let ended = {
            let fut = side.run(i);
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    r = &mut fut => break Some(abort_reason(r)),
                    sig = listener.next() => {
                        aborted = Some(interrupted(sig));
                        let graceful =
                            stop.have_requests_begun() && (spec.load.is_some() || fixed_stop);
                        // A second signal may come before the first was heard: both are
                        // taken at once, and the run is dropped as at a second.
                        if !graceful || stop.is_set() || signals::received() > 1 {
                            break None;
                        }
                        stopped_by = Some(sig);
                        stop.stop();
                    }
                }
            }
        };
        let Some(reason) = ended else {
            break;
        };
        let stop_reason = reason.or_else(|| stopped_by.map(interrupted));
        if let (Some(sig), Some(last)) = (stopped_by, side.runs.last_mut()) {
            // Its objects all ended, but the load was not held for its --duration: the run
            // is not complete, and the summary's count of complete runs must say so.
            last.complete = false;
            last.first_error.get_or_insert_with(|| interrupted(sig));
        }
        if observer.wants_so_far() {
            // The final write tries again (and keeps the data elsewhere if it fails too).
            let so_far = side.report(expected, None)?;
            if let Err(e) = observer.report(Written::SoFar, Document::Run(&so_far)) {
                observer.warn(&format!("warning: {e:#}"));
            }
        }
        if stop_reason.is_some() {
            aborted = stop_reason;
            break;
        }
        if let Some(line) = judged.tripped() {
            aborted = Some(format!("stopped early: --fail-if {line}"));
            break;
        }
    }
    Ok(aborted)
}

/// The report with each `--fail-if` condition judged on it.
fn judged_by(mut report: Report, thresholds: &[Threshold]) -> Report {
    report.thresholds = judge(thresholds, &report);
    report
}

/// Why an incomplete report is incomplete: the signal that interrupted it, else the first
/// error of its runs.
fn failure(report: &Report, side: &Side<'_>, expected: usize) -> Option<String> {
    let skipped = report.runs.len() < expected;
    (!report.complete).then(|| {
        if let Some(why) = report
            .aborted
            .as_ref()
            .filter(|w| w.starts_with("interrupted"))
        {
            return why.clone();
        }
        let e = side
            .first_error()
            .unwrap_or_else(|| "run incomplete".into());
        if skipped {
            format!("{e} (no connection could be established; remaining runs skipped)")
        } else {
            e
        }
    })
}
