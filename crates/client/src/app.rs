//! The benchmark command: one configuration, `--runs` times, then the report.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use qbench_core::ccstate::StateMachine;
use qbench_core::telemetry::Timeline;
use qbench_core::Report;

use crate::clock::Clock;
use crate::config::Config;
use crate::output::{summary, JsonSink};
use crate::prepare::Prepared;
use crate::runner::abort_reason;
use crate::side::Side;

/// What the command ends with: whether every run was complete, else the first error.
pub struct Outcome {
    pub complete: bool,
    pub error: Option<String>,
}

/// The client's tokio runtime. One worker means the calling thread itself: with a separate
/// worker, every object completion would wake the thread blocked in `block_on` across threads
/// (a futex round trip each), which cost a quarter of the CPU on small-object workloads.
pub fn runtime(workers: u32) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match workers {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n as usize);
            b
        }
    };
    builder
        .thread_name("qbench-client")
        .enable_all()
        .build()
        .context("starting the client runtime")
}

/// A progress bar on stderr, shown only when stderr is a terminal and the work lasts > 1 s.
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} objects {per_sec} eta {eta}")
            .expect("valid template"),
    );
    if std::io::stderr().is_terminal() {
        // Only runs longer than a second get a bar.
        let b = bar.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !b.is_finished() {
                b.set_draw_target(ProgressDrawTarget::stderr());
            }
        });
    }
    bar
}

pub async fn run(
    cfg: Config,
    command: Vec<String>,
    prepared: &Prepared,
) -> anyhow::Result<Outcome> {
    let sink = JsonSink::new(cfg.json.clone());
    let server = prepared.servers.first().and_then(Option::as_ref);
    prepared.prime_tcp_metrics(&[&cfg]).await?;
    let mut side = Side::new(&cfg, server, prepared, command, Clock::start()).await?;
    let bar = progress_bar(side.objects() * u64::from(cfg.runs));
    let expected = cfg.runs as usize;
    let mut aborted = None;
    for i in 0..cfg.runs {
        let stop = abort_reason(side.run(i, &bar).await);
        sink.write_partial(&side.report(expected, None)?)?;
        if stop.is_some() {
            aborted = stop;
            break;
        }
    }
    bar.finish_and_clear();
    side.finish().await;
    let report = side.report(expected, aborted)?;
    sink.write_final(&report)?;
    write_cc_outputs(&cfg, &report)?;
    let headline = format!(
        "qbench {} -> {} ({}), {} over {} connection(s), {} run(s)",
        cfg.proto.as_str(),
        side.peer.origin.authority(),
        side.peer.description,
        cfg.objects.as_ref().map_or_else(
            || format!("{} URL fetches", cfg.total_objects),
            |w| w.to_string()
        ),
        cfg.connections,
        cfg.runs
    );
    let text = summary(&report, &headline);
    if sink.is_stdout() {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let skipped = report.runs.len() < expected;
    let error = (!report.complete).then(|| {
        let e = side
            .first_error()
            .unwrap_or_else(|| "run incomplete".into());
        if skipped {
            format!("{e} (no connection could be established; remaining runs skipped)")
        } else {
            e
        }
    });
    Ok(Outcome {
        complete: report.complete,
        error,
    })
}

/// `--state-graph` (all runs' connections) and `--plot` (first run).
fn write_cc_outputs(cfg: &Config, report: &Report) -> anyhow::Result<()> {
    let title = format!(
        "{} {}{}",
        cfg.proto.as_str(),
        cfg.cc.unwrap_or("server default cc"),
        cfg.cwnd_cap
            .map_or(String::new(), |c| format!(", cwnd cap {c} packets"))
    );
    let timelines: Vec<&Timeline> = report
        .runs
        .iter()
        .flat_map(|r| r.telemetry.iter().flatten())
        .collect();
    if let Some(path) = &cfg.state_graph {
        anyhow::ensure!(
            !timelines.is_empty(),
            "--state-graph: the server sent no telemetry"
        );
        let dot = StateMachine::infer(&timelines).to_dot(&title);
        std::fs::write(path, dot)
            .with_context(|| format!("--state-graph: writing {}", path.display()))?;
    }
    if let Some(path) = &cfg.plot {
        let first = report.runs.first().and_then(|r| r.telemetry.as_ref());
        let lines: Vec<(String, &Timeline)> = first
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| (format!("{} {} connection {i}", t.transport, t.cc), t))
            .collect();
        anyhow::ensure!(!lines.is_empty(), "--plot: the server sent no telemetry");
        let svg = crate::plot::cwnd_chart(&format!("cwnd over time: {title}"), &lines);
        std::fs::write(path, svg).with_context(|| format!("--plot: writing {}", path.display()))?;
    }
    Ok(())
}
