//! `qbench compare`: two configurations, back to back, round after round.

use anyhow::Context;
use qbench_core::compare::{CompareReport, Verdict};
use qbench_core::spec::CompareSpec;
use qbench_core::Stats;

use crate::app::progress_bar;
use crate::cli::{CompareArgs, Outputs};
use crate::clock::Clock;
use crate::config::{share_route, usage, Config, LinkChoice, TargetArgs};
use crate::export::{write_json, Dest};
use crate::prepare::Prepared;
use crate::side::Side;

/// The two validated configurations and how to call them.
pub struct Plan {
    pub a: Config,
    pub b: Config,
    pub labels: (String, String),
    pub rounds: u32,
    pub outputs: Outputs,
}

impl Plan {
    pub fn from_args(args: CompareArgs) -> anyhow::Result<Self> {
        args.run.load.check(args.run.json_stream.is_some())?;
        let spec = args.spec().ok_or_else(|| crate::config::ConfigError {
            flag: "--protos",
            message: "give exactly two, as A,B".into(),
        })?;
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
        Self::new(
            &spec,
            &args.run.target(),
            args.run.link_choice(),
            args.run.outputs(),
        )
    }

    /// Every check that concerns a comparison as a whole, for flags and scenario cells alike.
    pub fn new(
        spec: &CompareSpec,
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
        usage(
            spec.base.load.is_none(),
            "--duration",
            "a comparison's rounds compare page load times; hold a load with a single benchmark",
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
            crate::fds::check(&[c])?;
        }
        let [a, b] = sides;
        if outputs.plot.is_some() {
            crate::app::check_telemetry("--plot", &a)?;
        }
        outputs.check_writable()?;
        Ok(Self {
            a,
            b,
            labels,
            rounds: spec.rounds,
            outputs,
        })
    }
}

fn ms(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| format!("{:.2} ms", v / 1000.0))
}

fn table(r: &CompareReport) -> String {
    let c = &r.comparison;
    let mut out = format!(
        "qbench compare: A = {}, B = {}, {} rounds, alternating first\n",
        r.label_a, r.label_b, r.rounds
    );
    out.push_str(&format!("  {:<16}{:>16}{:>16}\n", "", "A", "B"));
    let row = |name: &str, f: &dyn Fn(&Stats) -> Option<f64>| {
        format!(
            "  {:<16}{:>16}{:>16}\n",
            name,
            ms(f(&c.plt_us_a)),
            ms(f(&c.plt_us_b))
        )
    };
    out.push_str(&row("PLT mean", &|s| s.mean));
    out.push_str(&row("PLT median", &|s| s.median));
    out.push_str(&row("PLT sd", &|s| s.sd));
    out.push_str(&format!(
        "  {:<16}{:>16}{:>16}\n",
        "complete runs",
        format!("{}/{}", r.a.summary.complete_runs, r.rounds),
        format!("{}/{}", r.b.summary.complete_runs, r.rounds)
    ));
    let diff = c
        .plt_diff_pct
        .map_or("-".into(), |d| format!("{d:+.1}% (positive: B faster)"));
    out.push_str(&format!("  PLT difference  {diff}\n"));
    if let Some(w) = &c.welch {
        out.push_str(&format!(
            "  Welch's t-test  t = {:.3}, df = {:.1}, p = {:.3e}\n",
            w.t, w.df, w.p
        ));
    }
    let verdict = match c.verdict {
        Verdict::AFaster => format!("A ({}) is faster, significant at p < 0.01", r.label_a),
        Verdict::BFaster => format!("B ({}) is faster, significant at p < 0.01", r.label_b),
        Verdict::Inconclusive => "inconclusive (not significant at p < 0.01)".into(),
    };
    out.push_str(&format!("  verdict         {verdict}\n"));
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

/// Runs the rounds; returns the first error when a side had incomplete runs.
pub async fn run(
    plan: &Plan,
    prepared: &Prepared,
    command: Vec<String>,
) -> anyhow::Result<(CompareReport, Option<String>)> {
    let clock = Clock::start();
    let json = plan.outputs.json.as_deref().map(Dest::parse);
    let server = |i: usize| prepared.servers.get(i).and_then(Option::as_ref);
    prepared.prime_tcp_metrics(&[&plan.a, &plan.b]).await?;
    let mut a = Side::open(&plan.a, server(0), prepared, command.clone(), clock).await?;
    let mut b = Side::open(&plan.b, server(1), prepared, command, clock).await?;
    let bar = progress_bar((a.objects() + b.objects()) * u64::from(plan.rounds));
    let mut first = Vec::new();
    let rounds = plan.rounds as usize;
    let build = |a: &Side<'_>, b: &Side<'_>, first: &[String]| -> anyhow::Result<CompareReport> {
        Ok(CompareReport::new(
            plan.rounds,
            plan.labels.clone(),
            first.to_vec(),
            a.report(rounds, None)?,
            b.report(rounds, None)?,
        ))
    };
    for round in 0..plan.rounds {
        let a_first = round % 2 == 0;
        first.push(if a_first { "a" } else { "b" }.to_string());
        if a_first {
            a.run(round, &bar).await;
            b.run(round, &bar).await;
        } else {
            b.run(round, &bar).await;
            a.run(round, &bar).await;
        }
        if let Some(Dest::File(path)) = &json {
            write_json(&Dest::File(path.clone()), &build(&a, &b, &first)?)?;
        }
    }
    bar.finish_and_clear();
    a.finish().await;
    b.finish().await;
    let report = build(&a, &b, &first)?;
    if let Some(dest) = &json {
        write_json(dest, &report)?;
    }
    if let Some(path) = &plan.outputs.plot {
        plot_both(path, &report)?;
    }
    crate::export::print_text(&table(&report), json.as_ref());
    let error = (!report.complete).then(|| {
        a.first_error()
            .map(|e| format!("A: {e}"))
            .or_else(|| b.first_error().map(|e| format!("B: {e}")))
            .unwrap_or_else(|| "incomplete rounds".into())
    });
    Ok((report, error))
}

/// Builds the link and servers, runs the rounds on a fresh runtime, and tears it all down;
/// SIGINT stops it cleanly.
pub fn run_blocking(
    plan: &Plan,
    command: Vec<String>,
) -> anyhow::Result<(CompareReport, Option<String>)> {
    let prepared = Prepared::new(&[&plan.a, &plan.b])?;
    let rt = crate::app::runtime(plan.a.spec().client_threads)?;
    let outcome = rt.block_on(async {
        tokio::select! {
            r = run(plan, &prepared, command) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    drop(prepared);
    outcome
}
