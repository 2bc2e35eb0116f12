//! `qbench compare`: two configurations, back to back, round after round.

use anyhow::Context;
use qbench_core::report::compare::{
    AutoRoundsRecord, CompareReport, DiscardedRound, Undecided, Warmup, ALPHA,
};
use qbench_core::spec::CompareSpec;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::stats::noise::STEAL_THRESHOLD_PCT;
use qbench_core::stats::rounds::{AutoRounds, Stopped};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::export::live_outputs::Watching;
use crate::export::progress::{round_prefix, Progress};
use crate::export::text::compare_table::table;
use crate::export::{write_json, Dest};
use crate::flags::cli::{CompareArgs, Outputs};
use qbench_engine::error::usage;
use qbench_engine::measure::clock::Clock;
use qbench_engine::plan::config::{share_route, Config, LinkChoice, TargetArgs};
use qbench_engine::session::side::Side;
use qbench_engine::setup::prepare::Prepared;
use qbench_engine::signals::{self, Interrupted};

/// The two validated configurations and how to call them.
pub struct Plan {
    pub a: Config,
    pub b: Config,
    pub labels: (String, String),
    /// Rounds to run; with `auto`, at most.
    pub rounds: u32,
    pub auto: Option<AutoRounds>,
    /// What the rounds compare, and how.
    pub metric: Metric,
    pub test: Test,
    /// Steal above this flags a run; `discard_noisy` runs such rounds again.
    pub steal_threshold: f64,
    pub discard_noisy: bool,
    /// `--recalibrate`: measure the link again before every round after the first.
    pub recalibrate: bool,
    pub outputs: Outputs,
    /// `--fail-if a-worse>P%|b-worse>P%`.
    pub thresholds: Vec<qbench_core::spec::threshold::Threshold>,
    /// `--warmup-rounds`: rounds before round 0 that are recorded and never judged.
    pub warmup_rounds: u32,
}

impl Plan {
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
        let mut plan = Self::new(
            &spec,
            (args.judge.metric, args.judge.test),
            &args.run.target(),
            args.run.link_choice(),
            args.run.outputs(),
        )?;
        if let Some(t) = args.judge.steal_threshold {
            plan.steal_threshold = t;
        }
        plan.discard_noisy = args.judge.discard_noisy;
        plan.recalibrate = args.judge.recalibrate;
        plan.warmup_rounds = args.judge.warmup_rounds;
        usage(
            !plan.recalibrate || plan.a.spec().link.is_some(),
            "--recalibrate",
            "needs --link (there is no link to measure)",
        )?;
        plan.thresholds.clone_from(&args.run.gate.fail_if);
        let key_log = qbench_engine::transport::tls::open_key_log(args.run.keylog.as_deref())?;
        plan.a.key_log.clone_from(&key_log);
        plan.b.key_log = key_log;
        if let Some(w) = plan.out_of_reach() {
            let flag = match plan.auto {
                Some(_) => "--max-rounds",
                None => "--rounds",
            };
            crate::tell!("warning: {flag} {}: {w}", plan.rounds);
        }
        Ok(plan)
    }

    /// Why no number of rounds this plan may run lets its test reach significance, if none
    /// does: said before the rounds run, as the verdict will say after them.
    pub fn out_of_reach(&self) -> Option<String> {
        let n = self.rounds as usize;
        let Some(Undecided::TooFewRounds {
            smallest_p, needed, ..
        }) = Undecided::beyond_reach(self.test, n, n)
        else {
            return None;
        };
        let fix = match needed {
            Some(k) => format!("run {k} rounds or more, or judge with --test welch"),
            None => "judge with --test welch".into(),
        };
        Some(format!(
            "{} with {n} rounds a side cannot give p below {ALPHA} (its smallest is {}), \
             so the verdict will be inconclusive however far apart the sides are: {fix}",
            self.test.title(),
            qbench_core::stats::fmt_p(smallest_p)
        ))
    }

    /// Every check that concerns a comparison as a whole, for flags and scenario cells alike.
    pub fn new(
        spec: &CompareSpec,
        (metric, test): (Option<Metric>, Test),
        target: &TargetArgs,
        link: LinkChoice,
        outputs: Outputs,
    ) -> anyhow::Result<Self> {
        usage(
            spec.base.runs == 1,
            "--runs",
            "a comparison repeats in --rounds",
        )?;
        usage(
            !spec.base.reuse,
            "--reuse",
            "every round uses fresh connections",
        )?;
        usage(spec.rounds >= 2, "--rounds", "at least 2")?;
        let load = spec.base.load.as_ref();
        let metric = metric.unwrap_or(Metric::default_for_spec(&spec.base));
        metric
            .check(load)
            .map_err(|message| qbench_engine::error::ConfigError {
                flag: "--metric",
                message,
            })?;
        usage(
            !metric.is_video() || spec.base.video.is_some(),
            "--metric",
            format!("{metric} is a video session's figure: it needs --video"),
        )?;
        let labels = spec.labels();
        let (sa, sb) = spec.sides();
        let mut sides = [
            Config::new(sa, target, link).context("side A")?,
            Config::new(sb, target, link).context("side B")?,
        ];
        share_route(&mut sides)?;
        // The sides run one after the other.
        for c in &sides {
            qbench_engine::setup::fds::check(&[c])?;
        }
        let [a, b] = sides;
        if outputs.plot.is_some() {
            qbench_engine::plan::config::check_telemetry("--plot", &a)?;
        }
        outputs.check_writable()?;
        Ok(Self {
            a,
            b,
            labels,
            rounds: spec.rounds,
            auto: spec.auto_rounds,
            metric,
            test,
            steal_threshold: STEAL_THRESHOLD_PCT,
            discard_noisy: false,
            recalibrate: false,
            outputs,
            thresholds: Vec::new(),
            warmup_rounds: crate::flags::judge::DEFAULT_WARMUP_ROUNDS,
        })
    }
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
fn rewrites(plan: &Plan) -> bool {
    let json = plan.outputs.json.as_deref().map(Dest::parse);
    json.as_ref().and_then(Dest::rewritable).is_some()
        || plan
            .outputs
            .html
            .as_deref()
            .is_some_and(crate::export::rewritable)
}

/// The JSON report and its page again where each is a file that may be rewritten (a device
/// or FIFO takes one document, the final one).
fn rewrite(plan: &Plan, r: &CompareReport) -> anyhow::Result<()> {
    let json = plan.outputs.json.as_deref().map(Dest::parse);
    if let Some(path) = json.as_ref().and_then(Dest::rewritable) {
        write_json(&Dest::File(path.clone()), r)?;
    }
    match plan
        .outputs
        .html
        .as_deref()
        .filter(|p| crate::export::rewritable(p))
    {
        Some(path) => write_page(path, r),
        None => Ok(()),
    }
}

/// Why the two sides' last runs were noisy, when either was.
fn noisy(a: &Side<'_>, b: &Side<'_>) -> Option<qbench_core::stats::noise::NoisyRound> {
    let last = |s: &Side<'_>| s.runs.last().and_then(|r| r.noise.as_ref()).cloned();
    qbench_core::stats::noise::noisy_round(&[last(a), last(b)])
}

/// The rounds as they went: the warm-up, which side went first in each round kept, why they
/// ended early, and the noisy rounds dropped and run again.
#[derive(Default)]
struct Rounds {
    warmup: Warmup,
    first: Vec<String>,
    stopped: Option<Stopped>,
    aborted: Option<String>,
    discarded: Vec<DiscardedRound>,
}

impl Rounds {
    /// The report of the rounds so far, or of all of them once they ended.
    fn report(&self, plan: &Plan, a: &Side<'_>, b: &Side<'_>) -> anyhow::Result<CompareReport> {
        let done = self.first.len();
        // With --rounds auto the rounds planned are the ones run so far, once the rule stops.
        let planned = match plan.auto {
            Some(_) if self.stopped.is_some() => done,
            _ => plan.rounds as usize,
        };
        let mut r = CompareReport::new(
            done as u32,
            plan.labels.clone(),
            self.first.clone(),
            (
                a.report(planned, self.aborted.clone())?,
                b.report(planned, self.aborted.clone())?,
            ),
            (plan.metric, plan.test),
        );
        r.auto_rounds = plan.auto.map(|rule| AutoRoundsRecord {
            rule,
            stopped: self.stopped,
        });
        r.aborted.clone_from(&self.aborted);
        r.discarded.clone_from(&self.discarded);
        r.warmup.clone_from(&self.warmup);
        r.thresholds =
            qbench_core::report::compare::judge_comparison(&plan.thresholds, &r.comparison);
        Ok(r)
    }
}

/// Runs the rounds; returns the first error when a side had incomplete runs.
pub async fn run(
    plan: &Plan,
    prepared: &Prepared,
    command: Vec<String>,
    watching: &Watching,
    rounds_started: &AtomicBool,
) -> anyhow::Result<(CompareReport, Option<String>)> {
    let json = plan.outputs.json.as_deref().map(Dest::parse);
    let (mut a, mut b) = open_sides(plan, prepared, command).await?;
    let bar = progress(plan, &a, &b);
    watching.show(&bar);
    let mut rounds = run_rounds(plan, &mut a, &mut b, &bar, rounds_started).await?;
    bar.finish_and_clear();
    a.finish().await;
    b.finish().await;
    // A signal after the rounds is reported as one during them is.
    let late = |when: &str| signals::take().map(|sig| Interrupted::new(sig, when).to_string());
    if rounds.aborted.is_none() {
        rounds.aborted = late("after the last round");
    }
    let mut report = rounds.report(plan, &a, &b)?;
    if let Some(dest) = &json {
        write_json(dest, &report)?;
    }
    if let Some(path) = &plan.outputs.html {
        write_page(path, &report)?;
    }
    if let Some(path) = &plan.outputs.plot {
        plot_both(path, &report)?;
    }
    if rounds.aborted.is_none() {
        if let Some(why) = late("while the report was written") {
            rounds.aborted = Some(why);
            report = rounds.report(plan, &a, &b)?;
            rewrite(plan, &report)?;
        }
    }
    let stdout_taken = plan.outputs.takes_stdout().then_some(Dest::Stdout);
    crate::export::print_text(&table(&report), stdout_taken.as_ref());
    let error = (!report.complete).then(|| {
        if let Some(why) = &report.aborted {
            return why.clone();
        }
        a.first_error()
            .map(|e| format!("A: {e}"))
            .or_else(|| b.first_error().map(|e| format!("B: {e}")))
            .unwrap_or_else(|| "incomplete rounds".into())
    });
    Ok((report, error))
}

/// Both sides, connected, on one clock.
async fn open_sides<'a>(
    plan: &'a Plan,
    prepared: &'a Prepared,
    command: Vec<String>,
) -> anyhow::Result<(Side<'a>, Side<'a>)> {
    let clock = Clock::start();
    let server = |i: usize| prepared.servers.get(i).and_then(Option::as_ref);
    prepared.prime_tcp_metrics(&[&plan.a, &plan.b]).await?;
    let mut a = Side::open(&plan.a, server(0), prepared, command.clone(), clock).await?;
    let mut b = Side::open(&plan.b, server(1), prepared, command, clock).await?;
    a.steal_threshold = plan.steal_threshold;
    b.steal_threshold = plan.steal_threshold;
    Ok((a, b))
}

/// A held load's bar counts time; workloads of known sizes, payload bytes; any other, objects.
fn progress(plan: &Plan, a: &Side<'_>, b: &Side<'_>) -> Progress {
    let rounds = u64::from(plan.rounds + plan.warmup_rounds);
    let rounds_of = |per_side: u64| per_side.saturating_mul(2 * rounds);
    let objects = (a.objects() + b.objects()) * rounds;
    let bytes =
        |side: &Side<'_>, cfg| crate::export::live_outputs::expected_bytes(cfg, side.objects());
    match (&plan.a.spec().load, bytes(a, &plan.a), bytes(b, &plan.b)) {
        (Some(l), _, _) => Progress::time(rounds_of(l.duration.as_millis() as u64)),
        (None, Some(x), Some(y)) => {
            Progress::bytes(x.saturating_add(y).saturating_mul(rounds), objects)
        }
        (None, _, _) => Progress::objects(objects),
    }
}

/// Round after round, each side first in turn, until `--rounds`, the auto rule, or a stopping
/// signal ends them; the report so far is rewritten after every round.
async fn run_rounds(
    plan: &Plan,
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    bar: &Progress,
    rounds_started: &AtomicBool,
) -> anyhow::Result<Rounds> {
    let mut rounds = Rounds::default();
    // A stopping signal ends the rounds; the report still comes, `aborted` naming it.
    let mut listener = signals::Listener::new();
    rounds_started.store(true, Ordering::Relaxed);
    if let Some(sig) = warm_up(plan, (a, b), bar, &mut listener, &mut rounds.warmup).await {
        rounds.aborted = Some(Interrupted::new(sig, "during the warm-up").to_string());
        return Ok(rounds);
    }
    // The warm-up shows whose clock each side's times are (a program that prints no times of
    // its own is timed by the server): sides timed at different places are not compared.
    // A failed run may have fallen back to the server's view; the verdict then says so.
    let w = &rounds.warmup;
    let whole = w.a.iter().chain(&w.b).all(|r| r.complete);
    if let Some(why) = qbench_core::report::clocks::mismatch(&w.a, &w.b).filter(|_| whole) {
        anyhow::bail!("--a.client, --b.client: the warm-up round says {why}");
    }
    let mut round = 0;
    while round < plan.rounds {
        if plan.recalibrate && round > 0 {
            if let Some(why) = super::recalibrate::recalibrate(strict_link(plan), a, round).await {
                rounds.aborted = Some(why);
                break;
            }
        }
        let a_first = round % 2 == 0;
        rounds
            .first
            .push(if a_first { "a" } else { "b" }.to_string());
        let prefix = |side| round_prefix(round, plan.rounds, label(plan, side), side);
        if let Some(sig) = run_round(
            (round, &prefix),
            a_first,
            (&mut *a, &mut *b),
            bar,
            &mut listener,
        )
        .await
        {
            rounds.aborted =
                Some(Interrupted::new(sig, format!("during round {round}")).to_string());
            drop_half_round(a, b);
            rounds.first.pop();
            break;
        }
        if plan.discard_noisy && rounds.discarded.len() < plan.rounds as usize {
            if let Some(n) = noisy(a, b) {
                let why: Vec<String> = n.causes.iter().map(ToString::to_string).collect();
                crate::tell!("round {round}: {}, dropped and run again", why.join(", "));
                a.discard_last();
                b.discard_last();
                rounds.first.pop();
                rounds.discarded.push(DiscardedRound {
                    round,
                    steal_pct: n.steal_pct,
                    causes: n.causes,
                });
                continue;
            }
        }
        round += 1;
        if let Some(rule) = plan.auto {
            let so_far = rounds.report(plan, a, b)?;
            rounds.stopped = rule.check(round, so_far.comparison.effect.as_ref());
        }
        if rounds.stopped.is_some() {
            break;
        }
        if rewrites(plan) {
            rewrite(plan, &rounds.report(plan, a, b)?)?;
        }
    }
    Ok(rounds)
}

/// `--strict-link`: a field that misses ends the command.
fn strict_link(plan: &Plan) -> bool {
    plan.a.link_options.as_ref().is_some_and(|o| o.strict)
}

/// Side `side`'s label.
fn label(plan: &Plan, side: char) -> &str {
    match side {
        'A' => &plan.labels.0,
        _ => &plan.labels.1,
    }
}

/// `--warmup-rounds`: rounds of both sides before round 0, in the rounds' order, their runs
/// moved from the sides into `record`; the stopping signal that cut them short, if one did.
async fn warm_up(
    plan: &Plan,
    (a, b): (&mut Side<'_>, &mut Side<'_>),
    bar: &Progress,
    listener: &mut signals::Listener,
    record: &mut Warmup,
) -> Option<i32> {
    for w in 0..plan.warmup_rounds {
        let a_first = w % 2 == 0;
        record
            .first
            .push(if a_first { "a" } else { "b" }.to_string());
        let prefix = |side| {
            format!(
                "warm-up {}/{}, {} ({side}): ",
                w + 1,
                plan.warmup_rounds,
                label(plan, side)
            )
        };
        let sig = run_round((w, &prefix), a_first, (&mut *a, &mut *b), bar, listener).await;
        record.a.extend(a.discard_last());
        record.b.extend(b.discard_last());
        if sig.is_some() {
            return sig;
        }
    }
    None
}

/// One round (run `round` of each side), both sides in turn, the bar naming the one running;
/// the stopping signal that cut it short, if one did.
async fn run_round(
    (round, prefix): (u32, &dyn Fn(char) -> String),
    a_first: bool,
    (a, b): (&mut Side<'_>, &mut Side<'_>),
    bar: &Progress,
    listener: &mut signals::Listener,
) -> Option<i32> {
    let show = |side: char| bar.set_prefix(prefix(side));
    let both = async {
        if a_first {
            show('A');
            a.run(round).await;
            show('B');
            b.run(round).await;
        } else {
            show('B');
            b.run(round).await;
            show('A');
            a.run(round).await;
        }
    };
    tokio::select! {
        () = both => None,
        sig = listener.next() => Some(sig),
    }
}

/// Rounds are compared in pairs: half a round is no round.
fn drop_half_round(a: &mut Side<'_>, b: &mut Side<'_>) {
    match a.runs.len().cmp(&b.runs.len()) {
        std::cmp::Ordering::Greater => a.discard_last(),
        std::cmp::Ordering::Less => b.discard_last(),
        std::cmp::Ordering::Equal => None,
    };
}

/// Builds the link and servers, runs the rounds on a fresh runtime, and tears it all down;
/// SIGINT, SIGTERM and SIGHUP stop it cleanly.
pub fn run_blocking(
    plan: &Plan,
    command: Vec<String>,
    watching: &Watching,
) -> anyhow::Result<(CompareReport, Option<String>)> {
    // Once rounds started, the round loop takes a stopping signal and still writes the report.
    let threads = plan.a.spec().client_threads;
    let (mut report, error) = qbench_engine::setup::harness::run(
        &[&plan.a, &plan.b],
        threads,
        watching.observer(),
        async |prepared, started| run(plan, prepared, command, watching, started).await,
    )?;
    if let Err(late) = qbench_engine::setup::harness::late_signal() {
        // The report says so too: a Ctrl-C is never ignored, whenever it came.
        if report.aborted.is_none() {
            report.aborted = Some(late.to_string());
            report.complete = false;
            rewrite(plan, &report)?;
        }
        return Ok((report, Some(late.to_string())));
    }
    Ok((report, error))
}
