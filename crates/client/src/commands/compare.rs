//! `qbench compare`: two configurations, back to back, round after round. The engine runs
//! them (`qbench_engine::compare`); this is the command line around it: the plan from the
//! flags, the progress bar, and the table and files the report goes to.

use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use qbench_core::report::compare::CompareReport;
use qbench_engine::observe::{Document, Later, Presenter, Stage, Started, Written};
use qbench_engine::{CompareOutcome, ComparePlan};

use crate::export::live_outputs::{expected_bytes, Watching};
use crate::export::progress::{round_prefix, Progress};
use crate::export::text::compare_table::table;
use crate::export::{write_json, Dest};
use crate::flags::cli::{CompareArgs, Outputs};
use crate::flags::gate::ThresholdsFailed;
use qbench_engine::error::usage;

/// `qbench compare`: the engine's plan, and the outputs the report goes to.
pub struct Comparison {
    pub plan: ComparePlan,
    pub outputs: Outputs,
    pub dry_run: bool,
}

impl Comparison {
    pub fn from_args(args: CompareArgs) -> anyhow::Result<Self> {
        args.run.load.check(args.run.json_stream.is_some())?;
        args.run
            .apps
            .check(args.run.objects.is_some(), !args.run.urls.is_empty())?;
        args.run.fleet.refuse("compare")?;
        args.run.refuse_single_benchmark_outputs("compare")?;
        let spec = args.spec()?;
        // Identical sides are an A/A control only when asked for by name.
        let (sa, sb) = spec.sides();
        usage(
            !args.protos.is_empty() || sa != sb,
            "--protos",
            format!(
                "both sides are `{0}`: give two protocols (--protos h2,h3), set a./b. options, \
                 or ask for an A/A control with --protos {0},{0}",
                spec.protos.0
            ),
        )?;
        usage(
            args.run.state_graph.is_none(),
            "--state-graph",
            "run the sides one at a time for their state machines",
        )?;
        usage(
            args.run.load.interval.is_none() && args.run.json_stream.is_none(),
            "--interval",
            "live intervals are printed by a single benchmark (qbench without a subcommand)",
        )?;
        args.run.check_outputs()?;
        let outputs = args.run.outputs();
        let mut plan = ComparePlan::new(
            &spec,
            (args.judge.metric, args.judge.test),
            &args.run.target(),
            args.run.link_choice(),
        )?;
        check_outputs(&plan, &outputs)?;
        if let Some(t) = args.judge.steal_threshold {
            plan.steal_threshold = t;
        }
        plan.discard_noisy = args.judge.discard_noisy;
        plan.command = std::env::args().collect();
        plan.recalibrate = args.judge.recalibrate;
        plan.warmup_rounds = args.judge.warmup_rounds;
        usage(
            !plan.recalibrate || plan.a.spec().link.is_some(),
            "--recalibrate",
            "needs --link (there is no link to measure)",
        )?;
        plan.thresholds.clone_from(&args.run.gate.fail_if);
        let key_log = qbench_engine::tls::open_key_log(args.run.keylog.as_deref())?;
        plan.a.key_log.clone_from(&key_log);
        plan.b.key_log = key_log;
        if let Some(w) = plan.out_of_reach() {
            let flag = match plan.auto {
                Some(_) => "--max-rounds",
                None => "--rounds",
            };
            crate::tell!("warning: {flag} {}: {w}", plan.rounds);
        }
        Ok(Self {
            plan,
            outputs,
            dry_run: args.run.build.dry_run,
        })
    }
}

/// What of the outputs a comparison's plan can write: checked before the link is built.
pub fn check_outputs(plan: &ComparePlan, outputs: &Outputs) -> anyhow::Result<()> {
    if outputs.plot.is_some() {
        qbench_engine::plan::check_telemetry("--plot", &plan.a)?;
    }
    outputs.check_writable()?;
    Ok(())
}

/// `qbench compare [flags]`: the comparison, its table and outputs, and how it ends.
pub fn command(args: CompareArgs) -> anyhow::Result<()> {
    let c = Comparison::from_args(args)?;
    // Both sides share the first one's link.
    if c.dry_run && super::run::print_link_plan(&c.plan.a)? {
        return Ok(());
    }
    let outcome = run(&c.plan, &c.outputs, &Watching::default())?;
    match (
        outcome.error,
        qbench_core::report::thresholds::failed_line(&outcome.report.thresholds),
    ) {
        (Some(e), _) => Err(anyhow::anyhow!(e)),
        (None, Some(t)) => Err(ThresholdsFailed(t).into()),
        (None, None) => Ok(()),
    }
}

/// Runs `plan`, showing it on `watching`'s terminal and writing `outputs`.
pub fn run(
    plan: &ComparePlan,
    outputs: &Outputs,
    watching: &Watching,
) -> anyhow::Result<CompareOutcome> {
    qbench_engine::compare(plan, &observing(plan, outputs, watching))
}

/// The handle a comparison runs with: its bar on `watching`'s terminal, then its table and
/// `outputs`.
pub fn observing(
    plan: &ComparePlan,
    outputs: &Outputs,
    watching: &Watching,
) -> qbench_engine::observe::Observing {
    let shown = Arc::new(CompareShown {
        watching: watching.clone(),
        outputs: outputs.clone(),
        rounds: plan.rounds + plan.warmup_rounds,
        bar: Mutex::new(None),
    });
    watching.observer().presenting(shown)
}

/// `--plot`: both sides' cwnd over time in the first round, on one chart.
fn plot_both(path: &std::path::Path, r: &CompareReport) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    for (label, rep) in [(&r.label_a, &r.a), (&r.label_b, &r.b)] {
        let first = rep.runs.first().and_then(|run| run.telemetry.as_ref());
        for (i, t) in first.into_iter().flatten().enumerate() {
            lines.push((
                format!("{label}: {} {} connection {i}", t.transport, t.cc),
                t,
            ));
        }
    }
    anyhow::ensure!(!lines.is_empty(), "--plot: the servers sent no telemetry");
    let title = format!(
        "cwnd over time, first round: {} vs {}",
        r.label_a, r.label_b
    );
    let svg = crate::export::svg::cwnd_chart(&title, &lines);
    std::fs::write(path, svg).with_context(|| format!("--plot: writing {}", path.display()))
}

/// `--html`: the comparison as a page.
fn write_page(path: &std::path::Path, r: &CompareReport) -> anyhow::Result<()> {
    crate::export::html::compare::page(r)
        .and_then(|html| crate::export::write_text(path, &html))
        .context("--html")
}

/// Whether `rewrite` writes anything: the report need not be built for it otherwise.
fn rewrites(outputs: &Outputs) -> bool {
    let json = outputs.json.as_deref().map(Dest::parse);
    json.as_ref().and_then(Dest::rewritable).is_some()
        || outputs
            .html
            .as_deref()
            .is_some_and(crate::export::rewritable)
}

/// The JSON report and its page again where each is a file that may be rewritten (a device
/// or FIFO takes one document, the final one).
fn rewrite(outputs: &Outputs, r: &CompareReport) -> anyhow::Result<()> {
    let json = outputs.json.as_deref().map(Dest::parse);
    if let Some(path) = json.as_ref().and_then(Dest::rewritable) {
        write_json(&Dest::File(path.clone()), r)?;
    }
    match outputs
        .html
        .as_deref()
        .filter(|p| crate::export::rewritable(p))
    {
        Some(path) => write_page(path, r),
        None => Ok(()),
    }
}

/// What a comparison shows and writes as the engine hands it over: the bar naming the side
/// that runs, then the table and the report's files.
struct CompareShown {
    watching: Watching,
    outputs: Outputs,
    /// Rounds the bar counts, the warm-up's too.
    rounds: u32,
    bar: Mutex<Option<Progress>>,
}

impl CompareShown {
    fn bar(&self) -> std::sync::MutexGuard<'_, Option<Progress>> {
        self.bar.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The table, then every output the report goes to.
    fn finally(&self, report: &CompareReport) -> anyhow::Result<()> {
        let json = self.outputs.json.as_deref().map(Dest::parse);
        if let Some(dest) = &json {
            write_json(dest, report)?;
        }
        if let Some(path) = &self.outputs.html {
            write_page(path, report)?;
        }
        if let Some(path) = &self.outputs.plot {
            plot_both(path, report)?;
        }
        Ok(())
    }
}

impl Presenter for CompareShown {
    fn started<'a>(&'a self, sides: &'a [Started<'a>]) -> Later<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let [a, b] = sides else {
                anyhow::bail!("a comparison has two sides");
            };
            let bar = progress(self.rounds, a, b);
            self.watching.show(&bar);
            *self.bar() = Some(bar);
            Ok(())
        })
    }

    fn stage(&self, s: &Stage<'_>) {
        let prefix = match *s {
            Stage::Round {
                round,
                of,
                label,
                side,
            } => round_prefix(round, of, label, side),
            Stage::WarmUp {
                round,
                of,
                label,
                side,
            } => format!("warm-up {}/{of}, {label} ({side}): ", round + 1),
        };
        if let Some(bar) = self.bar().as_ref() {
            bar.set_prefix(prefix);
        }
    }

    fn wants_so_far(&self) -> bool {
        rewrites(&self.outputs)
    }

    fn ended(&self) {
        if let Some(bar) = self.bar().as_ref() {
            bar.finish_and_clear();
        }
    }

    fn report(&self, w: Written, d: Document<'_>) -> anyhow::Result<()> {
        let Document::Compare(report) = d else {
            anyhow::bail!("a comparison writes a comparison's report");
        };
        match w {
            Written::Final => {
                self.finally(report)?;
                let stdout_taken = self.outputs.takes_stdout().then_some(Dest::Stdout);
                crate::export::print_text(&table(report), stdout_taken.as_ref());
                Ok(())
            }
            Written::SoFar | Written::Amended | Written::Unstarted => {
                rewrite(&self.outputs, report)
            }
        }
    }
}

/// A held load's bar counts time; workloads of known sizes, payload bytes; any other, objects.
fn progress(rounds: u32, a: &Started<'_>, b: &Started<'_>) -> Progress {
    let rounds = u64::from(rounds);
    let rounds_of = |per_side: u64| per_side.saturating_mul(2 * rounds);
    let objects = (a.objects + b.objects) * rounds;
    let bytes = |s: &Started<'_>| expected_bytes(s.spec, s.objects);
    match (&a.spec.load, bytes(a), bytes(b)) {
        (Some(l), _, _) => Progress::time(rounds_of(l.duration.as_millis() as u64)),
        (None, Some(x), Some(y)) => {
            Progress::bytes(x.saturating_add(y).saturating_mul(rounds), objects)
        }
        (None, _, _) => Progress::objects(objects),
    }
}
