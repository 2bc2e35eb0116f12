//! `qbench compete`: flows of several protocols at once through one bottleneck, each on its
//! own connection to its own in-process server, from their plan to the competition's report.

use anyhow::Context;
use futures_util::future::join_all;
use qbench_core::report::compete::{CompeteReport, Flow};
use qbench_core::spec::CompeteSpec;
use qbench_core::Report;

use super::side::Side;
use crate::error::usage;
use crate::measure::clock::Clock;
use crate::observe::{Observing, Presenter};
use crate::plan::config::{share_route, Config, LinkChoice, TargetArgs};
use crate::setup::harness::{late_signal, lifecycle};

/// One validated configuration per flow.
#[derive(Debug)]
pub struct CompetePlan {
    /// Each flow's label (`h3 #1`) and configuration.
    pub flows: Vec<(String, Config)>,
    /// The bottleneck, as the user wrote it.
    pub link_text: String,
    pub client_threads: u32,
    /// The command line, as the flows' reports record it: the caller's to set (empty from
    /// `new`).
    pub command: Vec<String>,
}

impl CompetePlan {
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
        crate::setup::fds::check(&cfgs.iter().collect::<Vec<_>>())?;
        let flows: Vec<(String, Config)> = labels.into_iter().zip(cfgs).collect();
        usage(flows.len() >= 2, "--flows", "at least two flows compete")?;
        Ok(Self {
            flows,
            link_text,
            client_threads: base.client_threads,
            command: Vec::new(),
        })
    }
}

/// Builds the link and servers, runs all flows at once and tears everything down, telling
/// `observer` as the flows start and end; a stopping signal, even one during the teardown,
/// ends it with an error.
pub fn compete(plan: &CompetePlan, observer: &Observing) -> anyhow::Result<CompeteReport> {
    let refs: Vec<&Config> = plan.flows.iter().map(|(_, c)| c).collect();
    let threads = plan.client_threads.max(2);
    let reports: Vec<Report> = lifecycle(&refs, threads, observer, async |prepared, _| {
        let clock = Clock::start();
        prepared.prime_tcp_metrics(&refs).await?;
        let mut sides = Vec::new();
        for (i, cfg) in refs.iter().enumerate() {
            let server = prepared.servers.get(i).and_then(Option::as_ref);
            let command = plan.command.clone();
            sides.push(Side::open(cfg, server, prepared, command, clock).await?);
        }
        let at: Vec<String> = sides.iter().map(|s| s.peer.origin.authority()).collect();
        let each: Vec<_> = (refs.iter().zip(&sides).zip(&at))
            .map(|((cfg, side), at)| side.started(cfg, at))
            .collect();
        observer.started(&each).await?;
        drop(each);
        join_all(sides.iter_mut().map(|s| s.run(0))).await;
        observer.ended();
        for s in &mut sides {
            s.finish().await;
        }
        sides.iter().map(|s| s.report(1, None)).collect()
    })?;
    // A signal during the teardown still stops it, as one during the flows does.
    late_signal()?;
    let flows = reports
        .into_iter()
        .zip(&plan.flows)
        .map(|(report, (label, _))| Flow::new(label.clone(), report))
        .collect();
    Ok(CompeteReport::new(flows))
}
