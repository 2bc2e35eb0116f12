//! Scaling charts: the points are the medians and ranges of the rounds' figures as the
//! reports hold them, and a sweep that does not vary a core count gets no chart.

use std::collections::BTreeMap;
use std::time::Duration;

use qbench_core::report::compare::CompareReport;
use qbench_core::report::config::RunConfig;
use qbench_core::scenario::{Cell, CellSpec};
use qbench_core::spec::{CompareSpec, RunSpec, SideOverrides, Target};
use qbench_core::stats::effect::Test;
use qbench_core::stats::metric::Metric;
use qbench_core::{
    CpuTimes, HandshakeInfo, ObjectOutcome, Protocol, Recorder, Report, ReportMeta, RunCpu,
    RunReport, ToolInfo,
};

use super::cell::Cmp;
use super::scaling::{charts, groups, lines, section, Figure, Line, Point};

const GB: u64 = 1_000_000_000;

/// One round that moved `bytes` in `secs` (first request to last byte) on one connection,
/// with `cpu_s` seconds of client CPU, half user and half system, if measured.
pub(in crate::export) fn round(index: u32, bytes: u64, secs: f64, cpu_s: Option<f64>) -> RunReport {
    let mut r = Recorder::new(index, 1, Duration::ZERO);
    let c = r.connection_started(Duration::ZERO);
    r.handshake_done(c, Duration::from_millis(1), HandshakeInfo::default());
    let done = Duration::from_secs_f64(secs);
    r.object(ObjectOutcome {
        intended: None,
        began: None,
        sent: Duration::ZERO,
        headers: Some(done / 2),
        done,
        body_bytes: bytes,
        error: None,
        status: Some(200),
        stream: Some(0),
    });
    let mut run = r.finish(done);
    run.cpu = cpu_s.map(|s| RunCpu::new(CpuTimes::new(s / 2.0, s / 2.0), None, bytes));
    run
}

pub(in crate::export) fn side(proto: Protocol, rounds: Vec<RunReport>) -> Report {
    let meta = ReportMeta {
        tool: ToolInfo {
            name: "qbench".into(),
            version: "test".into(),
        },
        started_at: "2026-01-01T00:00:00.000Z".into(),
        command: vec!["qbench".into()],
        config: RunConfig {
            spec: RunSpec {
                proto,
                ..RunSpec::default()
            },
            target: Target::InProcess,
            total_objects: 1,
            insecure: false,
            ca: None,
            connect_to: None,
            sender: None,
        },
        environment: Default::default(),
    };
    let n = rounds.len();
    Report::new(meta, rounds, n, None).unwrap()
}

fn cell(params: &[(&str, &str)], a: Report, b: Report) -> Cmp {
    judged_cell(params, a, b, Test::Welch)
}

/// A goodput comparison of `a` and `b` at axis values `params`, judged by `test`, its sides
/// labelled as `qbench compare` labels them.
pub(in crate::export) fn judged_cell(
    params: &[(&str, &str)],
    a: Report,
    b: Report,
    test: Test,
) -> Cmp {
    let params: BTreeMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let spec = CompareSpec {
        base: RunSpec::default(),
        protos: (a.config.spec.proto, b.config.spec.proto),
        rounds: a.runs.len() as u32,
        auto_rounds: None,
        a: SideOverrides::default(),
        b: SideOverrides::default(),
    };
    let labels = spec.labels();
    Cmp {
        cell: Cell {
            params,
            spec: CellSpec::Compare(spec),
            hash: "0123456789abcdef".into(),
        },
        report: CompareReport::new(
            a.runs.len() as u32,
            labels,
            vec![],
            (a, b),
            (Metric::Goodput, test),
        ),
        fdr: None,
    }
}

/// A cell at `connections = n`: 1 GB per round. h2 takes 1, 1 and 2 s whatever n (8, 8 and 4
/// Gbit/s) with 1 and 1.5 CPU-seconds and one round unmeasured; h3 takes 2/n, 1/n and 0.5/n
/// s (4n, 8n, 16n Gbit/s) with 0.5n, 0.25n and n CPU-seconds.
fn scaling_cell(n: u32, extra: &[(&str, &str)]) -> Cmp {
    let k = f64::from(n);
    let h2 = side(
        Protocol::H2,
        vec![
            round(0, GB, 1.0, Some(1.0)),
            round(1, GB, 1.0, Some(1.5)),
            round(2, GB, 2.0, None),
        ],
    );
    let h3 = side(
        Protocol::H3,
        vec![
            round(0, GB, 2.0 / k, Some(0.5 * k)),
            round(1, GB, 1.0 / k, Some(0.25 * k)),
            round(2, GB, 0.5 / k, Some(k)),
        ],
    );
    let n = n.to_string();
    let mut params = vec![("connections", n.as_str())];
    params.extend_from_slice(extra);
    cell(&params, h2, h3)
}

fn sweep(ns: &[u32]) -> Vec<Cmp> {
    ns.iter().map(|&n| scaling_cell(n, &[])).collect()
}

fn point(n: u32, median: f64, min: f64, max: f64, rounds: usize) -> Point {
    Point {
        n,
        median,
        min,
        max,
        rounds,
    }
}

fn line<'a>(lines: &'a [Line], label: &str) -> &'a Line {
    lines.iter().find(|l| l.label == label).unwrap()
}

#[test]
fn points_are_the_medians_and_ranges_of_the_rounds() {
    let cells = sweep(&[4, 1, 2]);
    let g = groups(&cells, "connections");
    assert_eq!(g.len(), 1);
    let members = &g[""];

    let goodput = lines(members, Figure::Goodput);
    assert_eq!(goodput.len(), 2);
    assert_eq!(
        line(&goodput, "h2").points,
        [1, 2, 4].map(|n| point(n, 8.0, 4.0, 8.0, 3))
    );
    assert_eq!(
        line(&goodput, "h3").points,
        [
            point(1, 8.0, 4.0, 16.0, 3),
            point(2, 16.0, 8.0, 32.0, 3),
            point(4, 32.0, 16.0, 64.0, 3),
        ]
    );

    // The unmeasured h2 round is left out: the median of 1 and 1.5 s/GB over two rounds.
    let cpu = lines(members, Figure::CpuPerGb);
    assert_eq!(
        line(&cpu, "h2").points,
        [1, 2, 4].map(|n| point(n, 1.25, 1.0, 1.5, 2))
    );
    assert_eq!(
        line(&cpu, "h3").points,
        [
            point(1, 0.5, 0.25, 1.0, 3),
            point(2, 1.0, 0.5, 2.0, 3),
            point(4, 2.0, 1.0, 4.0, 3),
        ]
    );
    // Fixed colours per protocol, solid lines when the sides' protocols differ.
    assert_ne!(line(&cpu, "h2").colour, line(&cpu, "h3").colour);
    assert!(cpu.iter().all(|l| !l.dashed));
}

#[test]
fn cpu_per_gb_is_made_from_times_and_bytes_when_the_report_lacks_it() {
    let mut run = round(0, 2 * GB, 1.0, Some(3.0));
    assert_eq!(Figure::CpuPerGb.of(&run), Some(1.5));
    run.cpu.as_mut().unwrap().client_s_per_gb = None;
    assert_eq!(Figure::CpuPerGb.of(&run), Some(1.5));
    assert_eq!(Figure::Goodput.of(&run), Some(16.0));
    run.cpu = None;
    assert_eq!(Figure::CpuPerGb.of(&run), None);
}

#[test]
fn a_sweep_without_a_core_count_axis_draws_no_chart() {
    let cells: Vec<Cmp> = ["1x1KB", "1x10MB"]
        .iter()
        .map(|o| {
            let mut c = scaling_cell(1, &[("objects", o)]);
            c.cell.params.remove("connections");
            c
        })
        .collect();
    assert!(charts("s", &cells).is_empty());
    assert_eq!(section(&charts("s", &cells)), "");
}

#[test]
fn one_count_alone_draws_no_chart() {
    // `connections` has one value; `objects` varies, and is no core count.
    let cells = vec![
        scaling_cell(4, &[("objects", "1x1KB")]),
        scaling_cell(4, &[("objects", "1x10MB")]),
    ];
    assert!(charts("s", &cells).is_empty());
    // A value that is not a count is no second value either.
    let mut other = scaling_cell(4, &[]);
    other
        .cell
        .params
        .insert("connections".into(), "auto".into());
    assert!(charts("s", &[scaling_cell(4, &[]), other]).is_empty());
}

#[test]
fn each_chart_has_one_polyline_per_side_per_panel() {
    let charts = charts("dc <sweep>", &sweep(&[1, 2, 4]));
    assert_eq!(charts.len(), 1);
    let svg = &charts[0];
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // Two panels, two sides each.
    assert_eq!(svg.matches("<polyline").count(), 4);
    // A whisker (three lines) and a dot per point: 3 counts x 2 sides x 2 panels.
    assert_eq!(svg.matches("<circle").count(), 12);
    assert!(svg.contains("dc &lt;sweep&gt;: scaling with connections"));
    assert!(svg.contains("goodput (Gbit/s)") && svg.contains("(s/GB)"));
    assert!(svg.contains("connections (N, log2 scale)"));
    assert!(svg.contains("h3, connections=4: median 32.000 Gbit/s, min 16.000, max 64.000"));
    for n in ["1", "2", "4"] {
        assert!(svg.contains(&format!(">{n}</text>")), "tick {n}");
    }
    let page = section(&charts);
    assert!(page.starts_with("<h2>Scaling</h2><p>") && page.contains(svg.as_str()));
}

#[test]
fn a_panel_without_points_is_left_out() {
    let cells: Vec<Cmp> = [1, 2]
        .into_iter()
        .map(|n| {
            let mut c = scaling_cell(n, &[]);
            for r in c.report.a.runs.iter_mut().chain(&mut c.report.b.runs) {
                r.cpu = None;
            }
            c
        })
        .collect();
    let charts = charts("s", &cells);
    assert_eq!(charts.len(), 1);
    assert_eq!(charts[0].matches("<polyline").count(), 2);
    assert!(!charts[0].contains("s/GB"));
}

#[test]
fn other_varying_axes_split_the_charts() {
    // connections x threads x objects: per count axis, one chart per value pair of the
    // other two.
    let mut cells = Vec::new();
    for o in ["1x1KB", "1x10MB"] {
        for t in ["1", "2"] {
            for n in [1, 2] {
                cells.push(scaling_cell(n, &[("objects", o), ("threads", t)]));
            }
        }
    }
    let charts = charts("s", &cells);
    assert_eq!(charts.len(), 8);
    assert!(charts
        .iter()
        .any(|c| c.contains("scaling with connections (objects=1x10MB threads=2)")));
    assert!(charts
        .iter()
        .any(|c| c.contains("scaling with threads (objects=1x1KB connections=1)")));
    assert!(charts.iter().all(|c| c.matches("<polyline").count() == 4));
}

#[test]
fn one_protocol_on_both_sides_is_told_apart() {
    let cells: Vec<Cmp> = [1, 2]
        .into_iter()
        .map(|n| {
            let mut c = scaling_cell(n, &[]);
            c.report.a.config.spec.proto = Protocol::H3;
            c.report.label_a = "h3".into();
            c
        })
        .collect();
    let g = groups(&cells, "connections");
    let l = lines(&g[""], Figure::Goodput);
    let labels: Vec<&str> = l.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["h3 (A)", "h3 (B)"]);
    assert_eq!((l[0].dashed, l[1].dashed), (false, true));
    assert_eq!(l[0].colour, l[1].colour);
}
