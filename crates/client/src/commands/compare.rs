//! `qbench compare`: two configurations, back to back, round after round.

use anyhow::Context;
use qbench_core::report::compare::{AutoRoundsRecord, CompareReport, DiscardedRound, Verdict};
use qbench_core::spec::CompareSpec;
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::stats::noise::{Losses, STEAL_THRESHOLD_PCT};
use qbench_core::stats::rounds::{AutoRounds, Stopped};
use qbench_core::Stats;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::export::progress::{progress_bar, time_bar};
use crate::export::{write_json, Dest};
use crate::flags::cli::{CompareArgs, Outputs};
use qbench_engine::measure::clock::Clock;
use qbench_engine::plan::config::{share_route, Config, LinkChoice, TargetArgs};
use qbench_engine::plan::error::usage;
use qbench_engine::plan::side::Side;
use qbench_engine::setup::prepare::Prepared;

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
    pub outputs: Outputs,
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
        qbench_engine::transport::tls::log_keys_to(args.run.keylog.as_deref())?;
        Ok(plan)
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
            .map_err(|message| qbench_engine::plan::error::ConfigError {
                flag: "--metric",
                message,
            })?;
        usage(
            !metric.is_video() || spec.base.video.is_some(),
            "--metric",
            format!("{metric} is a video session's figure: it needs --video"),
        )?;
        let labels = spec.labels();
        usage(
            labels.0 != labels.1,
            "--protos",
            format!(
                "both sides are `{}`; compare two protocols or set a./b. options",
                labels.0
            ),
        )?;
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
            outputs,
        })
    }
}

/// Per side: a figure summed over its runs.
fn per_side(r: &CompareReport, f: &dyn Fn(&qbench_core::Report) -> String) -> [String; 2] {
    [f(&r.a), f(&r.b)]
}

/// `n runs (first reason)` when the client limited any run of a side.
fn saturated(rep: &qbench_core::Report) -> Option<String> {
    let why: Vec<&String> = rep
        .runs
        .iter()
        .filter_map(|run| run.client.as_ref()?.saturated.as_ref())
        .collect();
    let first = why.first()?;
    Some(format!(
        "{} of {} runs ({first})",
        why.len(),
        rep.runs.len()
    ))
}

fn table(r: &CompareReport) -> String {
    let c = &r.comparison;
    let m = c.metric;
    let mut out = format!(
        "qbench compare: A = {}, B = {}, {} rounds, alternating first; comparing {}\n",
        r.label_a,
        r.label_b,
        r.rounds,
        m.title()
    );
    let line = |name: &str, [a, b]: [String; 2]| format!("  {name:<20}{a:>18}{b:>18}\n");
    out.push_str(&line("", ["A".into(), "B".into()]));
    let show = |v: Option<f64>| v.map_or("-".into(), |v| m.show(v));
    for (what, f) in [
        ("mean", (|s: &Stats| s.mean) as fn(&Stats) -> Option<f64>),
        ("median", |s| s.median),
        ("sd", |s| s.sd),
    ] {
        out.push_str(&line(
            &format!("{} {what}", m.title()),
            [show(f(&c.a)), show(f(&c.b))],
        ));
    }
    out.push_str(&line(
        "complete runs",
        per_side(r, &|rep| {
            format!("{}/{}", rep.summary.complete_runs, r.rounds)
        }),
    ));
    out.push_str(&line(
        "failed requests",
        per_side(r, &|rep| {
            rep.runs
                .iter()
                .map(|run| run.objects.failed)
                .sum::<u64>()
                .to_string()
        }),
    ));
    if r.a.summary.load.is_some() || r.b.summary.load.is_some() {
        let load = |f: &dyn Fn(&qbench_core::report::load::LoadSummary) -> String| {
            per_side(r, &|rep| rep.summary.load.as_ref().map_or("-".into(), f))
        };
        out.push_str(&line(
            "completed/s (mean)",
            load(&|l| {
                l.completed_rate
                    .mean
                    .map_or("-".into(), |v| format!("{v:.1}"))
            }),
        ));
        out.push_str(&line(
            "late, dropped",
            load(&|l| format!("{}, {}", l.late, l.dropped)),
        ));
    }
    let diff = c
        .diff_pct
        .map_or("-".into(), |d| format!("{d:+.1}% (positive: B better)"));
    out.push_str(&format!("  {:<20}{diff}\n", "difference (means)"));
    out.push_str(&effect_lines(c));
    if let Some(w) = &c.welch {
        out.push_str(&format!(
            "  {:<20}t = {:.3}, df = {:.1}, p = {:.3e}\n",
            "Welch's t-test", w.t, w.df, w.p
        ));
    }
    if let Some(auto) = &r.auto_rounds {
        let how = match auto.stopped {
            Some(Stopped::Settled) => format!(
                "stopped after {}: the interval is within \u{b1}{}%",
                r.rounds, auto.rule.precision_pct
            ),
            Some(Stopped::MaxRounds) => format!(
                "ran the maximum, {}: the interval is still wider than \u{b1}{}%",
                r.rounds, auto.rule.precision_pct
            ),
            None => format!("{} so far", r.rounds),
        };
        out.push_str(&format!("  {:<20}auto, {how}\n", "rounds"));
    }
    out.push_str(&noise_line(r));
    out.push_str(&losses_line(r));
    let better = if m.higher_is_better() {
        "higher"
    } else {
        "lower"
    };
    let test = c.test.name();
    let verdict = match c.verdict {
        Verdict::AFaster => format!(
            "A ({}) is better ({} {better}), significant at p < 0.01 ({test})",
            r.label_a,
            m.title()
        ),
        Verdict::BFaster => format!(
            "B ({}) is better ({} {better}), significant at p < 0.01 ({test})",
            r.label_b,
            m.title()
        ),
        Verdict::Inconclusive => format!("inconclusive (not significant at p < 0.01, {test})"),
    };
    out.push_str(&format!("  {:<20}{verdict}\n", "verdict"));
    for (side, rep) in [("A", &r.a), ("B", &r.b)] {
        if let Some(cpu) = crate::export::notes::client_cpu(&rep.runs) {
            out.push_str(&format!("  {:<20}{side}: {cpu}\n", "client cpu"));
        }
        if let Some(p) = crate::export::notes::proxy(&rep.runs) {
            out.push_str(&format!("  {:<20}{side}: {p}\n", "proxy"));
        }
    }
    for (side, rep) in [("A", &r.a), ("B", &r.b)] {
        if let Some(why) = saturated(rep) {
            out.push_str(&match rep.runs.iter().any(qbench_engine::setup::client_cpu::limited) {
                true => format!(
                    "  note: {side}'s client was held to its --client-cpu quota in {why}, as asked\n"
                ),
                false => format!(
                    "  WARNING: the client was saturated in {side}'s {why}: a client limit, not a server result\n"
                ),
            });
        }
    }
    out
}

/// Steal time and load over the rounds' runs, the noisy ones, and the rounds dropped.
fn noise_line(r: &CompareReport) -> String {
    let noise: Vec<_> =
        r.a.runs
            .iter()
            .chain(&r.b.runs)
            .filter_map(|run| run.noise.as_ref())
            .collect();
    if noise.is_empty() {
        return String::new();
    }
    let max_steal = noise.iter().map(|n| n.steal_pct).fold(0.0, f64::max);
    let busy = Stats::of(&noise.iter().map(|n| n.busy_pct).collect::<Vec<_>>()).median;
    let noisy = noise.iter().filter(|n| n.noisy).count();
    let mut line = format!(
        "  {:<20}steal at most {max_steal:.1}%, machine busy {:.0}% (median); {noisy} of {} runs noisy",
        "noise",
        busy.unwrap_or(0.0),
        noise.len()
    );
    if !r.discarded.is_empty() {
        let steal: Vec<String> = r
            .discarded
            .iter()
            .map(|d| format!("{:.0}%", d.steal_pct))
            .collect();
        line.push_str(&format!(
            "; {} round(s) dropped and run again ({} steal)",
            r.discarded.len(),
            steal.join(", ")
        ));
    }
    line + "\n"
}

/// Median per round of the losses each side's sender declared and the link dropped, when
/// both are known (telemetry and a link).
fn losses_line(r: &CompareReport) -> String {
    let side = |rep: &qbench_core::Report| -> Option<String> {
        let l: Vec<Losses> = rep.runs.iter().filter_map(Losses::of).collect();
        let med = |f: fn(&Losses) -> u64| {
            Stats::of(&l.iter().map(|x| f(x) as f64).collect::<Vec<_>>()).median
        };
        Some(format!(
            "{:.0} declared lost, {:.0} dropped by the link",
            med(|x| x.declared)?,
            med(|x| x.dropped)?
        ))
    };
    match (side(&r.a), side(&r.b)) {
        (Some(a), Some(b)) => format!(
            "  {:<20}A: {a}; B: {b} (median per round; the rest were reordered or late, or dropped outside the link)\n",
            "losses"
        ),
        _ => String::new(),
    }
}

/// The chosen test's effect with its interval, and its statistic.
fn effect_lines(c: &qbench_core::report::compare::Comparison) -> String {
    let m = c.metric;
    let mut out = String::new();
    let what = match c.test {
        Test::Welch => "difference of means",
        Test::MannWhitney => "Hodges-Lehmann shift",
        Test::Bootstrap => "difference of medians",
    };
    if let Some(e) = &c.effect {
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:+.1}%"));
        let interval = match (e.rel_low_pct, e.rel_high_pct) {
            (Some(_), Some(_)) => format!(
                " [{}, {}] ({:.0}% interval)",
                pct(e.rel_low_pct),
                pct(e.rel_high_pct),
                e.level * 100.0
            ),
            _ => " (too few rounds for an interval)".into(),
        };
        let raw = if e.diff < 0.0 {
            format!("-{}", m.show(-e.diff))
        } else {
            format!("+{}", m.show(e.diff))
        };
        out.push_str(&format!(
            "  {:<20}{}{interval}; B - A = {raw} ({what})\n",
            "effect",
            pct(e.rel_pct)
        ));
    }
    let stat = match (c.test, c.statistic, c.p) {
        (Test::MannWhitney, Some(u), Some(p)) => format!("U = {u}, p = {p:.3e}"),
        (Test::Bootstrap, Some(_), Some(p)) => format!("p = {p:.3e} (10,000 resamples)"),
        _ => String::new(),
    };
    if !stat.is_empty() {
        let name = match c.test {
            Test::MannWhitney => "Mann-Whitney U",
            _ => "bootstrap",
        };
        out.push_str(&format!("  {name:<20}{stat}\n"));
    }
    out
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

/// The larger steal share of the two sides' last runs, when either was noisy.
fn noisy(a: &Side<'_>, b: &Side<'_>) -> Option<f64> {
    let last = |s: &Side<'_>| s.runs.last().and_then(|r| r.noise.as_ref()).cloned();
    qbench_core::stats::noise::noisy_round(&[last(a), last(b)])
}

/// Runs the rounds; returns the first error when a side had incomplete runs.
pub async fn run(
    plan: &Plan,
    prepared: &Prepared,
    command: Vec<String>,
    rounds_started: &AtomicBool,
) -> anyhow::Result<(CompareReport, Option<String>)> {
    let clock = Clock::start();
    let json = plan.outputs.json.as_deref().map(Dest::parse);
    let server = |i: usize| prepared.servers.get(i).and_then(Option::as_ref);
    prepared.prime_tcp_metrics(&[&plan.a, &plan.b]).await?;
    let mut a = Side::open(&plan.a, server(0), prepared, command.clone(), clock).await?;
    let mut b = Side::open(&plan.b, server(1), prepared, command, clock).await?;
    a.steal_threshold = plan.steal_threshold;
    b.steal_threshold = plan.steal_threshold;
    let rounds_of = |per_side: u64| per_side.saturating_mul(2 * u64::from(plan.rounds));
    let bar = match &plan.a.spec().load {
        Some(l) => time_bar(rounds_of(l.duration.as_millis() as u64)),
        None => progress_bar((a.objects() + b.objects()) * u64::from(plan.rounds)),
    };
    let mut first = Vec::new();
    // With --rounds auto the rounds planned are the ones run so far, once the rule stops.
    let build = |a: &Side<'_>,
                 b: &Side<'_>,
                 first: &[String],
                 stopped: Option<Stopped>,
                 aborted: Option<&String>|
     -> anyhow::Result<CompareReport> {
        let (done, planned) = match plan.auto {
            Some(_) if stopped.is_some() => (first.len(), first.len()),
            _ => (first.len(), plan.rounds as usize),
        };
        let mut r = CompareReport::new(
            done as u32,
            plan.labels.clone(),
            first.to_vec(),
            (
                a.report(planned, aborted.cloned())?,
                b.report(planned, aborted.cloned())?,
            ),
            (plan.metric, plan.test),
        );
        r.auto_rounds = plan.auto.map(|rule| AutoRoundsRecord { rule, stopped });
        r.aborted = aborted.cloned();
        Ok(r)
    };
    let mut stopped = None;
    let mut discarded: Vec<DiscardedRound> = Vec::new();
    // A stopping signal ends the rounds; the report still comes, `aborted` naming it.
    let mut signals = qbench_engine::setup::interrupt::Listener::new();
    rounds_started.store(true, Ordering::Relaxed);
    let mut aborted = None;
    let mut round = 0;
    while round < plan.rounds {
        let a_first = round % 2 == 0;
        first.push(if a_first { "a" } else { "b" }.to_string());
        let watch = crate::export::progress::observer(&bar);
        let both = async {
            if a_first {
                a.run(round, &watch).await;
                b.run(round, &watch).await;
            } else {
                b.run(round, &watch).await;
                a.run(round, &watch).await;
            }
        };
        if let Some(sig) = tokio::select! {
            () = both => None,
            sig = signals.next() => Some(sig),
        } {
            let name = qbench_engine::setup::interrupt::name(sig);
            aborted = Some(format!("interrupted ({name}) during round {round}"));
            // Rounds are compared in pairs: half a round is no round.
            if a.runs.len() != b.runs.len() {
                let ahead = if a.runs.len() > b.runs.len() {
                    &mut a
                } else {
                    &mut b
                };
                ahead.discard_last();
            }
            first.pop();
            break;
        }
        if plan.discard_noisy && discarded.len() < plan.rounds as usize {
            if let Some(steal_pct) = noisy(&a, &b) {
                crate::tell!("round {round}: {steal_pct:.0}% steal time, dropped and run again");
                a.discard_last();
                b.discard_last();
                first.pop();
                discarded.push(DiscardedRound { round, steal_pct });
                continue;
            }
        }
        round += 1;
        if let Some(rule) = plan.auto {
            let so_far = build(&a, &b, &first, None, None)?;
            stopped = rule.check(round, so_far.comparison.effect.as_ref());
        }
        if stopped.is_some() {
            break;
        }
        if let Some(path) = json.as_ref().and_then(Dest::rewritable) {
            let mut so_far = build(&a, &b, &first, None, None)?;
            so_far.discarded.clone_from(&discarded);
            write_json(&Dest::File(path.clone()), &so_far)?;
        }
    }
    bar.finish_and_clear();
    a.finish().await;
    b.finish().await;
    let mut report = build(&a, &b, &first, stopped, aborted.as_ref())?;
    report.discarded = discarded;
    if let Some(dest) = &json {
        write_json(dest, &report)?;
    }
    if let Some(path) = &plan.outputs.plot {
        plot_both(path, &report)?;
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

/// Builds the link and servers, runs the rounds on a fresh runtime, and tears it all down;
/// SIGINT, SIGTERM and SIGHUP stop it cleanly.
pub fn run_blocking(
    plan: &Plan,
    command: Vec<String>,
) -> anyhow::Result<(CompareReport, Option<String>)> {
    // Once rounds started, the round loop takes a stopping signal and still writes the report.
    let threads = plan.a.spec().client_threads;
    qbench_engine::setup::harness::run(&[&plan.a, &plan.b], threads, async |prepared, started| {
        run(plan, prepared, command, started).await
    })
}
