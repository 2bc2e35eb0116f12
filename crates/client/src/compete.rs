//! `qbench compete`: flows of several protocols at once through one bottleneck, each on its
//! own connection to its own in-process server: per-flow goodput, per-flow throughput over
//! time (from the servers' byte counters) and Jain's fairness index.

use anyhow::Context;
use futures_util::future::join_all;
use qbench_core::stats::jain;
use qbench_core::Report;
use serde::{Deserialize, Serialize};

use crate::app::progress_bar;
use crate::cli::CompeteArgs;
use crate::clock::Clock;
use crate::config::Config;
use crate::prepare::Prepared;
use crate::side::Side;

pub const SCHEMA: &str = "qbench.compete-report";

#[derive(Debug, Serialize, Deserialize)]
pub struct Flow {
    pub label: String,
    pub goodput_bps: Option<f64>,
    /// (ms since the flow's connection started, bit/s over the preceding sample interval).
    pub throughput: Vec<(f64, f64)>,
    pub report: Report,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CompeteReport {
    pub schema: String,
    pub flows: Vec<Flow>,
    /// Over the flows' goodputs: 1 = perfectly fair, 1/n = one flow took everything.
    pub jain_index: Option<f64>,
    pub complete: bool,
}

fn throughput(report: &Report) -> Vec<(f64, f64)> {
    let samples = report
        .runs
        .first()
        .and_then(|r| r.telemetry.as_ref())
        .and_then(|t| t.first())
        .map(|t| t.samples.clone())
        .unwrap_or_default();
    samples
        .windows(2)
        .filter(|w| w[1].t_us > w[0].t_us)
        .map(|w| {
            let bits = w[1].bytes_sent.saturating_sub(w[0].bytes_sent) as f64 * 8.0;
            let secs = (w[1].t_us - w[0].t_us) as f64 / 1e6;
            (w[1].t_us as f64 / 1000.0, bits / secs)
        })
        .collect()
}

pub fn compete(args: CompeteArgs) -> anyhow::Result<()> {
    let json = args.run.json.clone();
    let out = run_blocking(args)?;
    if let Some(path) = &json {
        let text = serde_json::to_vec_pretty(&out)?;
        if path == "-" {
            use std::io::Write;
            std::io::stdout().write_all(&text)?;
        } else {
            std::fs::write(path, text).with_context(|| format!("writing {path}"))?;
        }
    }
    anyhow::ensure!(out.complete, "some flows did not complete");
    Ok(())
}

/// Builds the link and servers, runs all flows at once, tears everything down, prints the
/// summary (to stderr when the JSON goes to stdout) and returns the report.
pub fn run_blocking(args: CompeteArgs) -> anyhow::Result<CompeteReport> {
    let base = args.run;
    anyhow::ensure!(
        base.runs == 1,
        "--runs: a competition is one run of all flows at once"
    );
    anyhow::ensure!(
        base.link.is_some(),
        "--link: flows compete for an emulated bottleneck; give one"
    );
    let mut cfgs = Vec::new();
    let mut labels = Vec::new();
    for (proto, n) in &args.flows.0 {
        for i in 0..*n {
            let mut a = base.clone();
            a.proto = *proto;
            a.json = None;
            a.plot = None;
            a.state_graph = None;
            cfgs.push(Config::from_args(a).with_context(|| format!("flow {}", proto.as_str()))?);
            labels.push(format!("{} #{}", proto.as_str(), i + 1));
        }
    }
    anyhow::ensure!(cfgs.len() >= 2, "--flows: at least two flows compete");
    let refs: Vec<&Config> = cfgs.iter().collect();
    let prepared = Prepared::new(&refs)?;
    let rt = crate::app::runtime(base.client_threads.max(2))?;
    let command: Vec<String> = std::env::args().collect();
    let result: anyhow::Result<Vec<Report>> = rt.block_on(async {
        let clock = Clock::start();
        prepared.prime_tcp_metrics(&refs).await?;
        let mut sides = Vec::new();
        for (i, cfg) in cfgs.iter().enumerate() {
            let server = prepared.servers.get(i).and_then(Option::as_ref);
            sides.push(Side::new(cfg, server, &prepared, command.clone(), clock).await?);
        }
        let total = sides.iter().map(|s| s.objects()).sum();
        let bar = progress_bar(total);
        let work = join_all(sides.iter_mut().map(|s| s.run(0, &bar)));
        tokio::select! {
            _ = work => {}
            _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted"),
        }
        bar.finish_and_clear();
        for s in &mut sides {
            s.finish().await;
        }
        sides.iter().map(|s| s.report(1, None)).collect()
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    drop(prepared);
    let reports = result?;
    let flows: Vec<Flow> = reports
        .into_iter()
        .zip(labels)
        .map(|(report, label)| Flow {
            label,
            goodput_bps: report.runs.first().and_then(|r| r.goodput_bps),
            throughput: throughput(&report),
            report,
        })
        .collect();
    let goodputs: Vec<f64> = flows.iter().map(|f| f.goodput_bps.unwrap_or(0.0)).collect();
    let out = CompeteReport {
        schema: SCHEMA.into(),
        jain_index: jain(&goodputs),
        complete: flows.iter().all(|f| f.report.complete),
        flows,
    };
    let mut text = format!(
        "qbench compete: {} flows through {}\n",
        out.flows.len(),
        base.link.as_ref().map_or(String::new(), |l| l.text.clone())
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
    if base.json.as_deref() == Some("-") {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    Ok(out)
}
