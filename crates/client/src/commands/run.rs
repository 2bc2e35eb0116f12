//! The benchmark command: one configuration, `--runs` times, then the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use qbench_core::report::early_stop::EarlyStop;
use qbench_core::{ErrorKind, Recorder, Report, ReportMeta};

use super::run_outputs::{rewrite, rewrites, write_outputs, written};
use crate::export::live_outputs::{progress, LiveOutputs, Watching};
use crate::export::text::run::summary;
use crate::export::{print_text, Dest};
use crate::flags::cli::{Outputs, RunArgs};
use crate::flags::gate::{Shown, ThresholdsFailed};
use qbench_core::report::thresholds::{failed_line, judge};
use qbench_core::spec::threshold::Threshold;
use qbench_engine::drive::runner::abort_reason;
use qbench_engine::error::bad;
use qbench_engine::error::ConfigError;
use qbench_engine::measure::clock::Clock;
use qbench_engine::plan::config::{check_telemetry, Config};
use qbench_engine::session::side::{report_meta, Side};
use qbench_engine::setup::prepare::{peer, Prepared};
use qbench_engine::signals::{self, Interrupted};

/// What the command ends with: whether every run was complete, else the first error.
pub struct Outcome {
    pub complete: bool,
    pub error: Option<String>,
    /// The report as written, where `--json` or `--html` is a file it may be rewritten to.
    pub report: Option<Report>,
    pub json: Option<Dest>,
    /// The `--fail-if` conditions the report met, as one line.
    pub thresholds_failed: Option<String>,
}

/// `--dry-run`: prints the commands `cfg`'s link would run; whether it has a link to print.
pub fn print_link_plan(cfg: &Config) -> anyhow::Result<bool> {
    let (Some(link), Some(opts)) = (&cfg.spec().link, &cfg.link_options) else {
        return Ok(false);
    };
    let (backend, script) = match &cfg.spec().link_b {
        Some(far) => qbench_shaper::topology::dry_run_chain(link, far, opts),
        None => qbench_shaper::topology::dry_run(link, opts),
    }
    .context("--dry-run")?;
    crate::say!("# backend: {backend:?}\n{script}");
    Ok(true)
}

/// `qbench [flags]`: builds the link and server, runs, and tears everything down; SIGINT,
/// SIGTERM and SIGHUP stop it cleanly.
pub fn benchmark(args: RunArgs) -> anyhow::Result<()> {
    let plan = RunPlan::from_args(&args)?;
    let cfg = &plan.cfg;
    if plan.dry_run && print_link_plan(cfg)? {
        return Ok(());
    }
    // From here a stopping signal is counted, never lost: before the link exists too.
    signals::hold()?;
    let command: Vec<String> = std::env::args().collect();
    let threads = cfg.spec().client_threads;
    let watching = Watching::default();
    let outcome = qbench_engine::setup::harness::run(
        &[cfg],
        threads,
        watching.observer(),
        async |prepared, takes_signals| {
            run(&plan, command.clone(), prepared, &watching, takes_signals).await
        },
    );
    let mut outcome = match outcome {
        Err(e) => match e.downcast_ref::<Interrupted>() {
            // Stopped before any run began: the report says so.
            Some(i) if i.before_work => {
                let json = plan.outputs.json.as_deref().map(Dest::parse);
                if json.is_some() || plan.outputs.html.is_some() {
                    let report =
                        before_any_run(report_meta(cfg, command), &plan, None, i.to_string())?;
                    written(&plan.outputs, json.as_ref(), &report)?;
                }
                return Err(e);
            }
            _ => return Err(e),
        },
        Ok(o) => o,
    };
    if let Err(late) = qbench_engine::setup::harness::late_signal() {
        // The report says so too: a Ctrl-C is never ignored, whenever it came. A run that
        // had already failed keeps its own reason.
        if let Some(mut report) = outcome.report.take() {
            if report.aborted.is_none() {
                report.aborted = Some(late.to_string());
                report.complete = false;
                rewrite(&plan.outputs, outcome.json.as_ref(), &report)?;
            }
        }
        return Err(late.into());
    }
    match (outcome.error, outcome.thresholds_failed) {
        (Some(e), _) => Err(anyhow::anyhow!(e)),
        (None, Some(t)) => Err(ThresholdsFailed(t).into()),
        (None, None) => {
            qbench_engine::output::lost::check_key_log(plan.cfg.key_log.as_deref());
            Ok(())
        }
    }
}

/// `qbench [flags]`: the validated plan of one benchmark.
pub struct RunPlan {
    pub cfg: Config,
    pub outputs: Outputs,
    pub dry_run: bool,
    /// `--shard auto/N`: the launcher variable that named the index.
    pub shard_source: Option<&'static str>,
    /// `--start-at`, resolved.
    pub barrier: Option<qbench_engine::setup::fleet::Barrier>,
    /// `--fail-if`.
    pub thresholds: Vec<Threshold>,
    /// `--metrics-listen`.
    pub metrics: Option<std::net::SocketAddr>,
    /// Interval lines are printed: `--interval` given, or `--tui` off a terminal
    /// (`--metrics-listen` and the live view tick intervals too).
    pub print_intervals: bool,
    /// The live view is shown (`--tui`, or a held load on a terminal).
    pub tui: bool,
    /// `--fail-early`.
    pub fail_early: bool,
}

impl RunPlan {
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        args.load.check(args.json_stream.is_some())?;
        if let Some(t) = args.gate.fail_if.iter().find(|t| t.metric.of_comparison()) {
            return Err(bad(
                "--fail-if",
                format!("`{t}` judges a comparison (qbench compare), not a single benchmark"),
            ));
        }
        args.apps
            .check(args.objects.is_some(), !args.urls.is_empty())?;
        let mut spec = args.spec();
        let outputs = args.outputs();
        let stdout_data = outputs.takes_stdout() || args.json_stream.as_deref() == Some("-");
        let (shown, note) = args.live.shown(
            spec.load.is_some(),
            args.load.interval.is_some(),
            stdout_data,
            crate::flags::gate::Terminals::now(),
        );
        if let Some(note) = note {
            crate::tell!("{note}");
        }
        let ticks =
            args.live.metrics_listen.is_some() || shown != Shown::Bar || args.gate.fail_early;
        if ticks && spec.interval.is_none() {
            // The counts served and shown are added up interval by interval: a second's, or
            // the whole of a shorter held load, which the user did not ask to cut in any.
            spec.interval = Some(implicit_interval(spec.load.as_ref().map(|l| l.duration))?);
        }
        let shard = args.fleet.shard()?;
        spec.shard = shard.map(|(s, _)| s);
        let cfg = Config::new(spec, &args.target(), args.link_choice())?;
        let barrier = args.fleet.barrier()?;
        qbench_engine::setup::fds::check(&[&cfg])?;
        if outputs.state_graph.is_some() {
            check_telemetry("--state-graph", &cfg)?;
        }
        if outputs.plot.is_some() {
            check_telemetry("--plot", &cfg)?;
        }
        args.check_outputs()?;
        let mut cfg = cfg;
        qlog_to(args, &mut cfg)?;
        // Opened (created) only once everything else is known to be valid.
        cfg.key_log = qbench_engine::transport::tls::open_key_log(args.keylog.as_deref())?;
        Ok(Self {
            cfg,
            outputs,
            dry_run: args.build.dry_run,
            shard_source: shard.and_then(|(_, source)| source),
            barrier,
            thresholds: args.gate.fail_if.clone(),
            metrics: args.live.metrics_listen,
            print_intervals: shown == Shown::Lines,
            tui: shown == Shown::View,
            fail_early: args.gate.fail_early,
        })
    }
}

/// The interval the live view, `--metrics-listen` and `--fail-early` count by when
/// `--interval` is not given: a second, or a held load's whole `duration` when shorter.
fn implicit_interval(duration: Option<Duration>) -> Result<Duration, ConfigError> {
    const SECOND: Duration = Duration::from_secs(1);
    const SHORTEST: Duration = Duration::from_millis(10);
    match duration {
        Some(d) if d < SHORTEST => Err(bad(
            "--duration",
            format!("{d:?} is too short to count in intervals (the live view, --metrics-listen and --fail-early need at least {SHORTEST:?})"),
        )),
        Some(d) => Ok(d.min(SECOND)),
        None => Ok(SECOND),
    }
}

/// `--qlog DIR [--qlog-sample P]`: the client's QUIC connections and the in-process server's
/// write qlog files there.
fn qlog_to(args: &RunArgs, cfg: &mut Config) -> Result<(), ConfigError> {
    let Some(dir) = &args.qlog else {
        return match args.qlog_sample {
            Some(_) => Err(bad("--qlog-sample", "needs --qlog")),
            None => Ok(()),
        };
    };
    if !cfg.spec().proto.is_quic() {
        return Err(bad(
            "--qlog",
            "qlog is written by QUIC connections: use --proto h3",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| bad("--qlog", format!("{}: {e}", dir.display())))?;
    qbench_engine::output::check_writable("--qlog", &dir.join("qbench.sqlog"))?;
    cfg.qlog_to(dir, args.qlog_sample.unwrap_or(1.0));
    Ok(())
}

/// A report of a run that ended before its first connection: nothing was fetched, and the
/// one error (`kind: message`) or the stopping signal says why.
fn before_any_run(
    meta: ReportMeta,
    plan: &RunPlan,
    error: Option<(ErrorKind, &str)>,
    why: String,
) -> anyhow::Result<Report> {
    let mut rec = Recorder::new(0, plan.cfg.run.total_objects, Duration::ZERO);
    if let Some((kind, message)) = error {
        rec.error(kind, message);
    }
    let run = rec.finish(Duration::ZERO);
    let expected = plan.cfg.spec().runs as usize;
    Ok(Report::new(meta, vec![run], expected, Some(why))?)
}

/// The runs and their report. The first stopping signal, whenever it comes from here on
/// (connecting, between runs, while the report is written), ends in a report with `aborted`
/// naming it, and a non-zero exit.
pub async fn run(
    plan: &RunPlan,
    command: Vec<String>,
    prepared: &Prepared,
    watching: &Watching,
    takes_signals: &AtomicBool,
) -> anyhow::Result<Outcome> {
    takes_signals.store(true, Ordering::SeqCst);
    let mut listener = signals::Listener::new();
    let json = plan.outputs.json.as_deref().map(Dest::parse);
    let meta = report_meta(&plan.cfg, command);
    // Connecting may take up to --timeout, and a barrier until its time: a signal cuts both.
    let opened = tokio::select! {
        r = open_side(plan, meta.clone(), prepared) => r?,
        sig = listener.next() => {
            let why = Interrupted::new(sig, "before run 0").to_string();
            Err(before_any_run(meta, plan, None, why)?)
        }
    };
    let mut side = match opened {
        Ok(side) => side,
        Err(report) => {
            // Its `aborted` is the one error, as `kind: message`, or the signal.
            written(&plan.outputs, json.as_ref(), &report)?;
            return Ok(Outcome {
                complete: false,
                error: report.aborted,
                report: None,
                json: None,
                thresholds_failed: None,
            });
        }
    };
    let bar = progress(&plan.cfg, &side);
    watching.show(&bar);
    let title = headline(&plan.cfg, &side);
    let live = LiveOutputs::start(
        &plan.cfg,
        &side,
        watching,
        plan.outputs.json_stream.as_deref(),
        plan.print_intervals,
        plan.metrics,
        plan.tui.then_some(title),
        plan.fail_early
            .then(|| EarlyStop::new(&plan.thresholds))
            .flatten(),
    )
    .await?;
    let mut aborted = None;
    if let Some(b) = &plan.barrier {
        tokio::select! {
            at = qbench_engine::setup::fleet::wait(b, &prepared.observer) => side.start = Some(at),
            sig = listener.next() => aborted = Some(Interrupted::new(sig, "before run 0").to_string()),
        }
    }
    if aborted.is_none() {
        aborted = run_all(plan, &mut side, &live, json.as_ref(), &mut listener).await?;
    }
    bar.finish_and_clear();
    live.close_view();
    side.finish().await;
    let expected = plan.cfg.spec().runs as usize;
    let last = |when: &str| signals::take().map(|sig| Interrupted::new(sig, when).to_string());
    let aborted = aborted.or_else(|| last("after the last run"));
    let mut report = judged(side.report(expected, aborted)?, &plan.thresholds);
    let stdout_taken = plan.outputs.takes_stdout().then_some(Dest::Stdout);
    print_text(
        &summary(&report, &headline(&plan.cfg, &side)),
        stdout_taken.as_ref(),
    );
    // After the summary: if writing fails, the numbers were at least shown.
    let written = write_outputs(&plan.cfg, &plan.outputs, json.as_ref(), &report);
    if report.aborted.is_none() {
        if let Some(why) = last("while the report was written") {
            // The report says so; an output the signal cut short (a FIFO with no reader
            // yet) is named, and the signal is what the command ends with.
            report = judged(side.report(expected, Some(why))?, &plan.thresholds);
            rewrite(&plan.outputs, json.as_ref(), &report)?;
            if let Err(e) = &written {
                crate::tell!("warning: {e:#}");
            }
            return Ok(Outcome {
                complete: false,
                error: report.aborted,
                report: None,
                json: None,
                thresholds_failed: None,
            });
        }
    }
    written?;
    live.final_scrape().await;
    let rewritable = json
        .as_ref()
        .and_then(Dest::rewritable)
        .map(|p| Dest::File(p.clone()));
    let again = rewrites(&plan.outputs, json.as_ref());
    // Stopped by --fail-early: the conditions failed the command, not the stop they caused;
    // what held when it stopped is named if the final figures no longer say so.
    let early = live.tripped();
    let error = failure(&report, &side, expected).filter(|_| early.is_none());
    Ok(Outcome {
        complete: report.complete,
        error,
        thresholds_failed: failed_line(&report.thresholds).or(early),
        report: again.then_some(report),
        json: rewritable,
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
            return Ok(Err(before_any_run(
                meta,
                plan,
                Some((e.kind, &e.message)),
                why,
            )?));
        }
    };
    prepared.prime_tcp_metrics(&[cfg]).await?;
    let mut side = Side::new(cfg, server, prepared, peer, meta, Clock::start())?;
    side.shard = qbench_engine::setup::fleet::record(cfg, plan.shard_source);
    if let Some(path) = &plan.outputs.log_requests {
        side.log_requests(qbench_engine::drive::reqlog::RequestLog::create(path)?);
    }
    Ok(Ok(side))
}

async fn run_all(
    plan: &RunPlan,
    side: &mut Side<'_>,
    live: &LiveOutputs,
    json: Option<&Dest>,
    listener: &mut signals::Listener,
) -> anyhow::Result<Option<String>> {
    let spec = plan.cfg.spec();
    let expected = spec.runs as usize;
    let mut aborted = None;
    let stop = side.stopper();
    // The signal that stopped a held load, whose run still ends and is reported.
    let mut stopped_by = None;
    let stopped_early = || {
        live.tripped()
            .map(|line| format!("stopped early: --fail-if {line}"))
    };
    for i in 0..spec.runs {
        // One that came while the last run's report was written.
        if let Some(sig) = signals::take() {
            aborted = Some(Interrupted::new(sig, format!("before run {i}")).to_string());
            break;
        }
        let interrupted = |sig: i32| Interrupted::new(sig, format!("during run {i}")).to_string();
        // A held load stops starting requests at a stopping signal and ends with those in
        // flight, so the run so far is reported; any other run is dropped at once.
        let ended = {
            let fut = side.run(i);
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    r = &mut fut => break Some(abort_reason(r)),
                    sig = listener.next() => {
                        aborted = Some(interrupted(sig));
                        if spec.load.is_none() || stop.is_set() {
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
        if rewrites(&plan.outputs, json) {
            // The final write tries again (and keeps the data elsewhere if it fails too).
            if let Err(e) = rewrite(&plan.outputs, json, &side.report(expected, None)?) {
                crate::tell!("warning: {e:#}");
            }
        }
        if stop_reason.is_some() {
            aborted = stop_reason;
            break;
        }
        if let Some(why) = stopped_early() {
            aborted = Some(why);
            break;
        }
    }
    Ok(aborted)
}

/// The summary's first line: what was fetched from where, how, and how many times.
fn headline(cfg: &Config, side: &Side<'_>) -> String {
    let spec = cfg.spec();
    // A page opens connections as a browser does, per origin, not `--connections`.
    let over = match &spec.page {
        Some(p) => format!(
            "{} objects from {} origin(s), connections opened as a browser opens them",
            p.profile.objects.len(),
            p.profile.origins.len()
        ),
        None => format!("over {} connection(s)", spec.connections),
    };
    format!(
        "qbench {} -> {} ({}), {} {over}, {} run(s){}",
        spec.proto,
        side.peer.origin.authority(),
        side.peer.description,
        fetched(cfg),
        spec.runs,
        held(cfg)
    )
}

/// The objects, video, page or URLs each run fetches.
fn fetched(cfg: &Config) -> String {
    let spec = cfg.spec();
    match (&spec.objects, &spec.video, &spec.page) {
        (Some(w), _, _) => w.to_string(),
        (None, Some(v), _) => format!(
            "a {} video ({}) in {} segments",
            humantime::format_duration(v.length),
            v.quality,
            v.segments()
        ),
        (None, None, Some(p)) => format!("page {}", p.name),
        (None, None, None) => format!("{} URL fetches", cfg.run.total_objects),
    }
}

/// How long and how hard a held load was held; empty without one.
fn held(cfg: &Config) -> String {
    let spec = cfg.spec();
    spec.load.as_ref().map_or(String::new(), |l| {
        let how = match l.rate {
            Some(r) => format!("at {r}/s ({:?} arrivals)", l.arrivals).to_lowercase(),
            None => format!(
                "with {} in flight per connection",
                spec.streams.unwrap_or(1)
            ),
        };
        let warm = if l.warmup.is_zero() {
            String::new()
        } else {
            format!(" after a {:?} warm-up", l.warmup)
        };
        format!(", held for {:?} {how}{warm}", l.window())
    })
}

/// The report with each `--fail-if` condition judged on it.
fn judged(mut report: Report, thresholds: &[Threshold]) -> Report {
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
