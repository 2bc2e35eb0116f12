//! The benchmark command: one configuration, `--runs` times, then the report. The engine
//! runs it (`qbench_engine::run`); this is the command line around it: the plan from the
//! flags, and what is shown and written as the engine hands it over.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use qbench_core::Report;

use super::run_outputs::{rewrite, rewrites, write_outputs, written};
use crate::export::live_outputs::{progress, LiveOutputs, Watching};
use crate::export::progress::Progress;
use crate::export::text::run::summary;
use crate::export::{print_text, Dest};
use crate::flags::cli::{Outputs, RunArgs};
use crate::flags::gate::{Shown, ThresholdsFailed};
use qbench_engine::error::bad;
use qbench_engine::error::ConfigError;
use qbench_engine::observe::{Document, Later, Presenter, Started, Written};
use qbench_engine::plan::{check_telemetry, Config};
use qbench_engine::RunPlan;

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
    let bench = Benchmark::from_args(&args)?;
    if bench.dry_run && print_link_plan(&bench.plan.cfg)? {
        return Ok(());
    }
    let shown = RunShown::new(&bench);
    let observing = shown.watching.observer().clone();
    let observing = observing.presenting(Arc::new(shown));
    let outcome = qbench_engine::run(&bench.plan, &observing)?;
    match (outcome.error, outcome.thresholds_failed) {
        (Some(e), _) => Err(anyhow::anyhow!(e)),
        (None, Some(t)) => Err(ThresholdsFailed(t).into()),
        (None, None) => Ok(()),
    }
}

/// `qbench [flags]`: the engine's plan of one benchmark, and what the command line shows
/// and writes of it.
pub struct Benchmark {
    pub plan: RunPlan,
    pub outputs: Outputs,
    pub dry_run: bool,
    /// `--metrics-listen`.
    pub metrics: Option<std::net::SocketAddr>,
    /// Interval lines are printed: `--interval` given, or `--tui` off a terminal
    /// (`--metrics-listen` and the live view tick intervals too).
    pub print_intervals: bool,
    /// The live view is shown (`--tui`, or a held load on a terminal).
    pub tui: bool,
}

impl Benchmark {
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
        qbench_engine::check_descriptors(&[&cfg])?;
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
        cfg.key_log = qbench_engine::tls::open_key_log(args.keylog.as_deref())?;
        let plan = RunPlan {
            cfg,
            command: std::env::args().collect(),
            shard_source: shard.and_then(|(_, source)| source),
            barrier,
            thresholds: args.gate.fail_if.clone(),
            fail_early: args.gate.fail_early,
            log_requests: outputs.log_requests.clone(),
        };
        Ok(Self {
            plan,
            outputs,
            dry_run: args.build.dry_run,
            metrics: args.live.metrics_listen,
            print_intervals: shown == Shown::Lines,
            tui: shown == Shown::View,
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
    qbench_engine::files::check_writable("--qlog", &dir.join("qbench.sqlog"))?;
    cfg.qlog_to(dir, args.qlog_sample.unwrap_or(1.0));
    Ok(())
}

/// What a benchmark shows and writes as the engine hands it over: the progress bar and the
/// live outputs while it runs, then the summary and the files its report goes to.
struct RunShown {
    watching: Watching,
    outputs: Outputs,
    json: Option<Dest>,
    metrics: Option<std::net::SocketAddr>,
    print_intervals: bool,
    tui: bool,
    /// What `--state-graph` and `--plot` are titled with.
    cc_title: String,
    live: Mutex<Option<Live>>,
}

/// What is shown from the moment the side is open.
struct Live {
    bar: Progress,
    outputs: LiveOutputs,
    /// The summary's first line, also the live view's title.
    headline: String,
}

impl RunShown {
    fn new(b: &Benchmark) -> Self {
        let spec = b.plan.cfg.spec();
        Self {
            watching: Watching::default(),
            outputs: b.outputs.clone(),
            json: b.outputs.json.as_deref().map(Dest::parse),
            metrics: b.metrics,
            print_intervals: b.print_intervals,
            tui: b.tui,
            cc_title: format!(
                "{} {}{}",
                spec.proto,
                spec.cc.map_or("server default cc", |c| c.as_str()),
                spec.cwnd_cap
                    .map_or(String::new(), |c| format!(", cwnd cap {c} packets"))
            ),
            live: Mutex::new(None),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Option<Live>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The summary, then every output the report goes to.
    fn finally(&self, report: &Report) -> anyhow::Result<()> {
        let headline = self.live().as_ref().map(|l| l.headline.clone());
        let stdout_taken = self.outputs.takes_stdout().then_some(Dest::Stdout);
        print_text(
            &summary(report, &headline.unwrap_or_default()),
            stdout_taken.as_ref(),
        );
        write_outputs(&self.cc_title, &self.outputs, self.json.as_ref(), report)
    }
}

impl Presenter for RunShown {
    fn started<'a>(&'a self, sides: &'a [Started<'a>]) -> Later<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let s = sides.first().context("a benchmark has one side")?;
            let bar = progress(s);
            self.watching.show(&bar);
            let headline = headline(s);
            let outputs = LiveOutputs::start(
                s,
                &self.watching,
                self.outputs.json_stream.as_deref(),
                self.print_intervals,
                self.metrics,
                self.tui.then(|| headline.clone()),
            )
            .await?;
            *self.live() = Some(Live {
                bar,
                outputs,
                headline,
            });
            Ok(())
        })
    }

    fn wants_so_far(&self) -> bool {
        rewrites(&self.outputs, self.json.as_ref())
    }

    fn ended(&self) {
        if let Some(live) = self.live().as_ref() {
            live.bar.finish_and_clear();
            live.outputs.close_view();
        }
    }

    fn report(&self, w: Written, d: Document<'_>) -> anyhow::Result<()> {
        let Document::Run(report) = d else {
            anyhow::bail!("a benchmark writes a benchmark's report");
        };
        match w {
            Written::Unstarted => written(&self.outputs, self.json.as_ref(), report),
            Written::SoFar | Written::Amended => rewrite(&self.outputs, self.json.as_ref(), report),
            Written::Final => self.finally(report),
        }
    }

    fn settle(&self) -> Later<'_, ()> {
        let metrics = self.live().as_ref().and_then(|l| l.outputs.metrics());
        Box::pin(async move {
            if let Some(m) = metrics {
                m.final_scrape().await;
            }
            // The endpoint and the interval outputs go with the runs, before the teardown.
            drop(self.live().take());
        })
    }
}

/// The summary's first line: what was fetched from where, how, and how many times.
fn headline(s: &Started<'_>) -> String {
    let spec = s.spec;
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
        s.authority,
        s.description,
        fetched(s),
        spec.runs,
        held(spec)
    )
}

/// The objects, video, page or URLs each run fetches.
fn fetched(s: &Started<'_>) -> String {
    let spec = s.spec;
    match (&spec.objects, &spec.video, &spec.page) {
        (Some(w), _, _) => w.to_string(),
        (None, Some(v), _) => format!(
            "a {} video ({}) in {} segments",
            humantime::format_duration(v.length),
            v.quality,
            v.segments()
        ),
        (None, None, Some(p)) => format!("page {}", p.name),
        (None, None, None) => format!("{} URL fetches", s.total_objects),
    }
}

/// How long and how hard a held load was held; empty without one.
fn held(spec: &qbench_core::spec::RunSpec) -> String {
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
