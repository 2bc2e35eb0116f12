//! `qbench cost`: criterion results -> the cost model in core -> a table, with measured run
//! reports held against the prediction.

use std::path::Path;

use anyhow::{bail, Context};
use qbench_core::stats::cost::{
    CostModel, CostReport, Estimates, EventCounts, Measured, MeasuredRun, Side, Stack,
};
use qbench_core::{Protocol, Report};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::export::{print_text, write_json, Dest};
use crate::flags::cli::CostArgs;

pub fn cost(args: CostArgs) -> anyhow::Result<()> {
    if let Some(j) = &args.json {
        qbench_engine::files::check_writable("--json", Path::new(j))?;
        let reports: Vec<_> = args
            .reports
            .iter()
            .map(|p| ("REPORT", p.as_path()))
            .collect();
        qbench_engine::files::check_not_inputs(&[("--json", Path::new(j))], &reports)?;
    }
    // The reports first: a bad one is the user's input, named with its file, whatever the
    // criterion results hold.
    let reports = args
        .reports
        .iter()
        .map(|p| read_report(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let est = read_estimates(&args.criterion)?;
    let model = CostModel::new(&est, &args.suite, args.mtu)?;
    let measured = reports
        .iter()
        .map(|(p, r)| measured(p, r, &model))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let json = args.json.as_deref().map(Dest::parse);
    print_text(&table(&model, &measured), json.as_ref());
    if let Some(dest) = &json {
        let out = CostReport::new(model, measured);
        write_json(dest, &out).context("--json")?;
    }
    Ok(())
}

/// Every `…/new/{benchmark,estimates}.json` under `dir`, keyed by criterion's full id.
fn read_estimates(dir: &Path) -> anyhow::Result<Estimates> {
    if !dir.is_dir() {
        bail!(
            "--criterion {}: no criterion results there; run `cargo bench -p qbench-benches` first",
            dir.display()
        );
    }
    let mut est = Estimates::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let entry = entry?;
            // Not following symlinks: a link loop would make the walk endless.
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == "new") {
                if let Some((id, ns)) = read_one(&path)? {
                    est.insert(id, ns);
                }
            } else {
                stack.push(path);
            }
        }
    }
    Ok(est)
}

fn read_one(dir: &Path) -> anyhow::Result<Option<(String, f64)>> {
    let (bench, estimates) = (dir.join("benchmark.json"), dir.join("estimates.json"));
    if !bench.is_file() || !estimates.is_file() {
        return Ok(None);
    }
    let id = read_json::<CriterionBenchmark>(&bench)?.full_id;
    let ns = read_json::<CriterionEstimates>(&estimates)?
        .median
        .point_estimate;
    Ok(Some((id, ns)))
}

/// The parts of criterion's `benchmark.json` and `estimates.json` the model needs.
#[derive(Deserialize)]
struct CriterionBenchmark {
    full_id: String,
}

#[derive(Deserialize)]
struct CriterionEstimates {
    median: CriterionEstimate,
}

#[derive(Deserialize)]
struct CriterionEstimate {
    point_estimate: f64,
}

fn read_json<T: DeserializeOwned>(p: &Path) -> anyhow::Result<T> {
    let text = qbench_engine::files::read_text(
        p,
        qbench_core::spec::input::MAX_ESTIMATES_BYTES,
        "criterion's estimates",
    )
    .map_err(anyhow::Error::msg)?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
}

/// A report, or a usage error (exit 2) naming its file and what is wrong with it.
fn read_report(path: &Path) -> anyhow::Result<(&Path, Report)> {
    let bad = |message: String| qbench_engine::error::ConfigError {
        flag: "REPORT",
        message,
    };
    let text = qbench_engine::files::read_text(
        path,
        qbench_core::spec::input::MAX_REPORT_BYTES,
        "a report",
    )
    .map_err(bad)?;
    let report = Report::from_json(&text).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    Ok((path, report))
}

fn measured(path: &Path, report: &Report, model: &CostModel) -> anyhow::Result<Measured> {
    let shown = path.display().to_string();
    let stack = match report.config.spec.proto {
        Protocol::H3 => Stack::Quic,
        Protocol::H2 => Stack::TcpTls,
        Protocol::H1 => {
            bail!("{shown}: config.proto is h1; the model covers h2 and h3 bulk transfers")
        }
    };
    let mut per_run = Vec::new();
    for run in report.runs.iter().filter(|r| r.complete) {
        let Some(cpu) = &run.cpu else {
            continue;
        };
        let Some(server) = cpu.server else {
            bail!("{shown}: the server ran elsewhere, so the report has only the client's CPU");
        };
        let both = cpu.client.plus(&server);
        let tcp = (stack == Stack::TcpTls)
            .then(|| Some(cpu.client_tcp?.plus(&cpu.server_tcp?)))
            .flatten();
        // A download's client sends little but ACKs: each datagram of its own is one.
        let ack_datagrams = (stack == Stack::Quic)
            .then(|| {
                run.connections
                    .iter()
                    .map(|c| c.quic.as_ref().map(|q| q.tx_datagrams))
                    .sum::<Option<u64>>()
            })
            .flatten();
        per_run.push(MeasuredRun {
            cpu_s: both.total_s(),
            payload_bytes: run.payload_bytes,
            events: EventCounts {
                wakeups: both.voluntary_switches.map(|n| n as f64),
                page_faults: both.minor_faults.map(|n| n as f64),
                ack_datagrams: ack_datagrams.map(|n| n as f64),
                tcp_read_calls: tcp.map(|t| EventCounts::calls_beyond_model(t.reads, t.read_bytes)),
                tcp_write_calls: tcp
                    .map(|t| EventCounts::calls_beyond_model(t.writes, t.written_bytes)),
            },
        });
    }
    if per_run.is_empty() {
        bail!("{shown}: no complete run with CPU figures");
    }
    let none = format!("{shown}: no complete run moved a payload byte, so there is no CPU per GB");
    Measured::new(shown, stack, &per_run, model).context(none)
}

fn side(s: Side) -> &'static str {
    match s {
        Side::Sender => "sender",
        Side::Receiver => "receiver",
        Side::Both => "both",
    }
}

fn table(model: &CostModel, measured: &[Measured]) -> String {
    let mut out = format!(
        "Userspace cost per GB of payload ({}, QUIC packets of {} B; medians from criterion)\n\n",
        model.suite, model.mtu
    );
    out += "| stack | side | component | ns per unit | unit | units per GB | CPU s per GB |\n";
    out += "| --- | --- | --- | ---: | --- | ---: | ---: |\n";
    for r in &model.rows {
        out += &format!(
            "| {} | {} | {} | {:.0} | {} | {:.0} | {:.3} |\n",
            r.stack.label(),
            side(r.side),
            r.component,
            r.ns_per_unit,
            r.unit,
            r.units_per_gb,
            r.cpu_s_per_gb
        );
    }
    let (q, t) = (
        model.predicted_quic_cpu_s_per_gb,
        model.predicted_tcp_tls_cpu_s_per_gb,
    );
    out += &format!(
        "\nPredicted CPU per GB: QUIC {q:.3} s, TCP+TLS {t:.3} s (QUIC / TCP+TLS = {:.2})\n",
        q / t
    );
    out += "\nWhat the component benches leave out, per event (a run counts them):\n\n";
    out += "| event | ns per event | benches |\n| --- | ---: | --- |\n";
    for e in &model.events {
        out += &format!(
            "| {} | {:.0} | {} |\n",
            e.event.label(),
            e.ns_per_event,
            e.benches.join(" + ")
        );
    }
    if !measured.is_empty() {
        out += "\n| report | stack | runs | event | per GB | CPU s per GB |\n";
        out += "| --- | --- | ---: | --- | ---: | ---: |\n";
        for m in measured {
            for e in &m.events {
                out += &format!(
                    "| {} | {} | {} | {} | {:.0} | {:.3} |\n",
                    m.source,
                    m.stack.label(),
                    m.runs,
                    e.event.label(),
                    e.per_gb,
                    e.cpu_s_per_gb
                );
            }
        }
        out += "\n| report | stack | runs | measured CPU s per GB | predicted by benches | with events | measured / predicted |\n";
        out += "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
        for m in measured {
            out += &format!(
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.2} |\n",
                m.source,
                m.stack.label(),
                m.runs,
                m.cpu_s_per_gb,
                m.predicted_cpu_s_per_gb,
                m.predicted_with_events_cpu_s_per_gb,
                m.ratio
            );
        }
        let of = |s| measured.iter().find(|m| m.stack == s);
        if let (Some(mq), Some(mt)) = (of(Stack::Quic), of(Stack::TcpTls)) {
            out += &format!(
                "\nMeasured QUIC / TCP+TLS CPU per GB: {:.2} (predicted {:.2} by benches, {:.2} with events)\n",
                mq.cpu_s_per_gb / mt.cpu_s_per_gb,
                q / t,
                mq.predicted_with_events_cpu_s_per_gb / mt.predicted_with_events_cpu_s_per_gb
            );
        }
    }
    out
}
