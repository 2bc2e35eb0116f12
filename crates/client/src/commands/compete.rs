//! `qbench compete`: flows of several protocols at once through one bottleneck, each on its
//! own connection to its own in-process server: per-flow goodput, per-flow throughput over
//! time (from the servers' byte counters) and Jain's fairness index.

use anyhow::Context;
use futures_util::future::join_all;
use qbench_core::report::compete::{CompeteReport, Flow};
use qbench_core::spec::CompeteSpec;
use qbench_core::Report;

use crate::export::live_outputs::Watching;
use crate::export::progress::Progress;
use crate::export::{print_text, write_json, Dest};
use crate::flags::cli::{CompeteArgs, Outputs};
use qbench_engine::error::usage;
use qbench_engine::measure::clock::Clock;
use qbench_engine::plan::config::{share_route, Config, LinkChoice, TargetArgs};
use qbench_engine::session::side::Side;

/// One validated configuration per flow.
pub struct Plan {
    flows: Vec<(String, Config)>,
    link_text: String,
    client_threads: u32,
}

impl Plan {
    /// Every check that concerns a competition, for flags and scenario cells alike.
    pub fn new(spec: &CompeteSpec, target: &TargetArgs, link: LinkChoice) -> anyhow::Result<Self> {
        let base = &spec.base;
        usage(
            base.runs == 1,
            "--runs",
            "a competition is one run of all flows at once",
        )?;
        let link_text = base
            .link
            .as_ref()
            .map(|l| l.text.clone())
            .context("--link: flows compete for an emulated bottleneck; give one")?;
        let (mut labels, mut cfgs) = (Vec::new(), Vec::new());
        for (proto, n) in &spec.flows {
            for i in 0..*n {
                let mut s = base.clone();
                s.proto = *proto;
                s.zero_rtt &= proto.is_quic();
                if !proto.is_quic() {
                    s.quic = Default::default();
                }
                cfgs.push(Config::new(s, target, link).with_context(|| format!("flow {proto}"))?);
                labels.push(format!("{proto} #{}", i + 1));
            }
        }
        share_route(&mut cfgs)?;
        qbench_engine::setup::fds::check(&cfgs.iter().collect::<Vec<_>>())?;
        let flows: Vec<(String, Config)> = labels.into_iter().zip(cfgs).collect();
        usage(flows.len() >= 2, "--flows", "at least two flows compete")?;
        Ok(Self {
            flows,
            link_text,
            client_threads: base.client_threads,
        })
    }
}

pub fn compete(args: CompeteArgs) -> anyhow::Result<()> {
    args.run.load.check(args.run.json_stream.is_some())?;
    args.run
        .apps
        .check(args.run.objects.is_some(), !args.run.urls.is_empty())?;
    usage(
        args.run.apps.video.is_none() && args.run.apps.page.is_none(),
        if args.run.apps.video.is_some() {
            "--video"
        } else {
            "--page"
        },
        "compete runs flows of --objects at once; compare sessions with `qbench compare`",
    )?;
    args.run.fleet.refuse("compete")?;
    args.run.refuse_single_benchmark_outputs("compete")?;
    usage(
        args.run.plot.is_none() && args.run.state_graph.is_none(),
        "--plot",
        "(and --state-graph) draw one flow at a time with `qbench`",
    )?;
    usage(
        args.run.load.duration.is_none()
            && args.run.load.interval.is_none()
            && args.run.json_stream.is_none(),
        "--duration",
        "competing flows each fetch --objects once",
    )?;
    let mut plan = Plan::new(&args.spec(), &args.run.target(), args.run.link_choice())?;
    let outputs: Outputs = args.run.outputs();
    args.run.check_outputs()?;
    let key_log = qbench_engine::transport::tls::open_key_log(args.run.keylog.as_deref())?;
    for (_, cfg) in &mut plan.flows {
        cfg.key_log.clone_from(&key_log);
    }
    let json = outputs.json.as_deref().map(Dest::parse);
    let out = run_blocking(&plan, json.as_ref(), &Watching::default())?;
    if let Some(dest) = &json {
        write_json(dest, &out)?;
    }
    anyhow::ensure!(out.complete, "some flows did not complete");
    qbench_engine::output::lost::check_key_log(key_log.as_deref());
    Ok(())
}

/// Builds the link and servers, runs all flows at once, tears everything down, prints the
/// summary (to stderr when the JSON goes to stdout) and returns the report.
pub fn run_blocking(
    plan: &Plan,
    json: Option<&Dest>,
    watching: &Watching,
) -> anyhow::Result<CompeteReport> {
    let refs: Vec<&Config> = plan.flows.iter().map(|(_, c)| c).collect();
    let command: Vec<String> = std::env::args().collect();
    let threads = plan.client_threads.max(2);
    let result: anyhow::Result<Vec<Report>> = qbench_engine::setup::harness::run(
        &refs,
        threads,
        watching.observer(),
        async |prepared, _| {
            let clock = Clock::start();
            prepared.prime_tcp_metrics(&refs).await?;
            let mut sides = Vec::new();
            for (i, cfg) in refs.iter().enumerate() {
                let server = prepared.servers.get(i).and_then(Option::as_ref);
                sides.push(Side::open(cfg, server, prepared, command.clone(), clock).await?);
            }
            let total = sides.iter().map(|s| s.objects()).sum();
            let bar = Progress::objects(total);
            watching.show(&bar);
            join_all(sides.iter_mut().map(|s| s.run(0))).await;
            bar.finish_and_clear();
            for s in &mut sides {
                s.finish().await;
            }
            sides.iter().map(|s| s.report(1, None)).collect()
        },
    );
    let reports = result?;
    // A signal during the teardown still stops it, as one during the flows does.
    qbench_engine::setup::harness::late_signal()?;
    let flows = reports
        .into_iter()
        .zip(&plan.flows)
        .map(|(report, (label, _))| Flow::new(label.clone(), report))
        .collect();
    let out = CompeteReport::new(flows);
    let mut text = format!(
        "qbench compete: {} flows through {}\n",
        out.flows.len(),
        plan.link_text
    );
    for f in &out.flows {
        text.push_str(&format!(
            "  {:<10} {}\n",
            f.label,
            f.goodput_bps
                .map_or("-".into(), |g| format!("{:.2} Mbit/s", g / 1e6))
        ));
    }
    text.push_str(&format!(
        "  Jain's index {}\n",
        out.jain_index.map_or("-".into(), |j| format!("{j:.3}"))
    ));
    print_text(&text, json);
    Ok(out)
}
