//! Held loads against the in-process server on loopback: duration, rate and interval modes,
//! checked by their counts and structure, never by their timings.

use crate::common;

use std::io::BufRead;
use std::time::{Duration, Instant};

use common::qbench;
use serde_json::Value;

fn run0(r: &Value) -> &Value {
    &r["runs"][0]
}

/// Intervals are contiguous, and what completed in them is what the run completed plus the
/// warm-up's requests.
fn assert_intervals_add_up(run: &Value) {
    let iv = run["intervals"].as_array().unwrap();
    assert!(iv.len() >= 2, "{iv:?}");
    for w in iv.windows(2) {
        assert_eq!(w[0]["end_us"], w[1]["start_us"]);
    }
    let done: u64 = iv.iter().map(|i| i["completed"].as_u64().unwrap()).sum();
    let warm = run["load"]["warmup_requests"].as_u64().unwrap();
    assert_eq!(done, run["objects"]["completed"].as_u64().unwrap() + warm);
    assert_eq!(iv[0]["warmup"], true);
    assert_eq!(iv.last().unwrap()["warmup"], false);
}

/// Closed loop on every protocol: a mix cycled for the duration, the warm-up left out.
#[test]
fn a_closed_loop_holds_every_protocol_for_its_duration() {
    for proto in ["h1", "h2", "h3"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "3x1KB,1x10KB",
            "--duration",
            "1500ms",
            "--warmup",
            "500ms",
            "--interval",
            "250ms",
            "--no-telemetry",
        ]);
        assert_eq!(r.code, Some(0), "{proto}: {}", r.stderr);
        let rep = r.json.as_ref().unwrap();
        assert_eq!(rep["config"]["load"]["duration_ms"], 1500, "{proto}");
        assert_eq!(rep["config"]["load"]["warmup_ms"], 500);
        let run = run0(rep);
        assert_eq!(run["complete"], true, "{proto}");
        assert_eq!(run["load"]["mode"], "closed");
        assert_eq!(run["load"]["window_us"], 1_000_000);
        assert!(run["load"]["warmup_requests"].as_u64().unwrap() > 0);
        let done = run["objects"]["completed"].as_u64().unwrap();
        // More than one cycle of the list, each cycle 3 KB + 10 KB.
        assert!(done > 4, "{proto}: {done}");
        assert_eq!(run["plt_us"], Value::Null);
        assert_eq!(run["object_latency"]["count"], done);
        assert_intervals_add_up(run);
        let client = &run["client"];
        assert!(client["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "qbench"));
        assert!(client["runtime_lag"]["count"].as_u64().unwrap() > 0);
        assert!(client.get("saturated").is_some());
        // The interval lines went to stderr, the warm-up's marked.
        assert!(
            r.stderr
                .contains("(warm-up requests in it are left out of the totals)"),
            "{}",
            r.stderr
        );
    }
}

/// Without `--warmup` every request counts, and no interval line says otherwise (the first
/// interval begins before the connections are up, when nothing is sent).
#[test]
fn without_a_warm_up_no_interval_is_called_one() {
    let r = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--duration",
        "600ms",
        "--interval",
        "200ms",
        "--no-telemetry",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("req/s"), "{}", r.stderr);
    assert!(!r.stderr.contains("warm-up"), "{}", r.stderr);
    let run = run0(r.json.as_ref().unwrap());
    let iv = run["intervals"].as_array().unwrap();
    assert!(iv.iter().all(|i| i["warmup"] == false), "{iv:?}");
    let done: u64 = iv.iter().map(|i| i["completed"].as_u64().unwrap()).sum();
    assert_eq!(done, run["objects"]["completed"].as_u64().unwrap());
    assert_eq!(run["load"]["warmup_requests"], 0);
}

/// Open loop at 400/s for 2 s, constant arrivals: exactly 800 requests are due in the
/// window and each is sent (late ones with their lag) or, if the window closed first, counted
/// as dropped; the intervals stream as JSON lines. With 2 client threads each paces its own
/// connections' requests, and the schedule still adds up.
#[test]
fn an_open_loop_sends_exactly_its_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("intervals.jsonl");
    for (proto, threads) in [("h2", "1"), ("h3", "1"), ("h2", "2"), ("h3", "2")] {
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "1x1KB",
            "--connections",
            "3",
            "--client-threads",
            threads,
            "--duration",
            "2500ms",
            "--warmup",
            "500ms",
            "--rate",
            "400",
            "--interval",
            "500ms",
            "--json-stream",
            stream.to_str().unwrap(),
            "--no-telemetry",
        ]);
        assert_eq!(r.code, Some(0), "{proto}: {}", r.stderr);
        let rep = r.json.as_ref().unwrap();
        let run = run0(rep);
        let load = &run["load"];
        assert_eq!(load["mode"], "open");
        assert_eq!(load["target_rate"], 400.0);
        // Every request due in the window is sent or counted as dropped. A request is
        // dropped only when it could not start before the window closed (a runtime starved
        // for the window's last moments, as beside two busy loops and a parallel test): late,
        // never for want of room. Up to 5% of the schedule, 100 ms of starvation at 400/s.
        let done = run["objects"]["completed"].as_u64().unwrap();
        let dropped = load["dropped"].as_u64().unwrap();
        assert_eq!(done + dropped, 800, "{proto}");
        assert_eq!(load["dropped_late"], dropped, "{proto}");
        assert!(dropped <= 40, "{proto}: {dropped} dropped");
        assert_eq!(load["warmup_requests"], 200);
        assert_eq!(load["achieved_rate"], done as f64 / 2.0);
        assert_eq!(load["lag"]["count"], done);
        assert_eq!(load["service_time"]["count"], done);
        assert_eq!(rep["config"]["streams"], Value::Null, "{proto}");
        assert_intervals_add_up(run);
        let spread = &run["spread"];
        assert_eq!(spread["client_threads"], threads.parse::<u64>().unwrap());
        // The client threads pace their own requests: no thread of its own does, and the
        // pacing's CPU is the client's.
        let roles = spread["roles"].as_array().unwrap();
        assert!(
            roles.iter().all(|r| r["role"] != "pacer"),
            "{proto}: {spread}"
        );
        let client = roles.iter().find(|r| r["role"] == "client").unwrap();
        assert!(client["cpu_s"].as_f64().unwrap() > 0.0, "{proto}: {client}");
        let lines: Vec<Value> = std::io::BufReader::new(std::fs::File::open(&stream).unwrap())
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect();
        assert_eq!(lines.len(), run["intervals"].as_array().unwrap().len());
        assert!(lines
            .iter()
            .all(|l| l["run"] == 0 && l["latency"]["hdr"].is_string()));
    }
}

/// SIGINT (or SIGTERM) during a held load: no request starts after it, those in flight finish,
/// and the report so far is written with `complete: false` and why.
#[test]
fn sigint_ends_a_held_load_with_the_report_so_far() {
    for (sig, name) in [common::STOPPING[0], common::STOPPING[1]] {
        held_load_stopped_by(sig, name);
    }
}

fn held_load_stopped_by(sig: i32, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = common::spawn_with_json(
        &[
            "--proto",
            "h2",
            "--objects",
            "1x1KB",
            "--duration",
            "60s",
            "--interval",
            "100ms",
            "--no-telemetry",
        ],
        &json,
    );
    // Wait (bounded) for the first interval line: the load is being held.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !line.contains("req/s") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "qbench ended early");
        assert!(Instant::now() < deadline);
    }
    common::send(&child, sig);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{rest}");
    assert!(
        rest.contains(&format!("error: interrupted ({name}) during run 0")),
        "{rest}"
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["complete"], false);
    assert_eq!(r["aborted"], format!("interrupted ({name}) during run 0"));
    let run = run0(&r);
    assert!(run["objects"]["completed"].as_u64().unwrap() > 0);
    assert_eq!(run["objects"]["failed"], 0, "in-flight requests finished");
    assert!(!run["intervals"].as_array().unwrap().is_empty());
    // Not held for its --duration: the run is not complete either, and the summary's "0/1 runs
    // complete" (from `complete_runs`) agrees with the exit status.
    assert_eq!(run["complete"], false);
    assert_eq!(r["summary"]["complete_runs"], 0);
}

/// An open loop far past the client's capacity (10 million requests per second for 1 s)
/// ends at its duration: requests the client could not start within a second of their time,
/// or by the window's end, are dropped and counted, every request due is either sent or
/// dropped, and the rates are those of what was sent.
#[test]
fn an_open_loop_past_capacity_ends_at_its_duration() {
    let r = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--rate",
        "10M",
        "--duration",
        "1s",
        "--no-telemetry",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json.unwrap();
    let l = &run0(&j)["load"];
    let (sent, dropped, late) = (
        l["sent"].as_u64().unwrap(),
        l["dropped"].as_u64().unwrap(),
        l["dropped_late"].as_u64().unwrap(),
    );
    // A constant schedule at 10M/s has exactly 10,000,000 requests due in 1 s.
    assert_eq!(sent + dropped, 10_000_000, "{l}");
    assert!(late > 0 && late <= dropped, "{l}");
    assert!(sent < 10_000_000, "{l}");
    let achieved = l["achieved_rate"].as_f64().unwrap();
    assert!(
        (achieved - sent as f64).abs() < 1.0,
        "rate per 1 s window: {achieved}, sent {sent}"
    );
    assert!(r.stderr.contains("past its capacity"), "{}", r.stderr);
}

/// One HTTP/1.1 connection over a 10 Mbit/s link, 10 KB due every 5 ms: each response takes
/// about 8 ms, so the requests queue behind the connection and start ever later, while the
/// client takes each up on time. The wait is the connection's: it shows in the start lag
/// and in its own line, and the client is not called the limit.
#[test]
fn requests_held_by_the_connection_are_not_the_clients_lag() {
    common::needs::require!(common::needs::Need::Link);
    let r = qbench(&[
        "--proto",
        "h1",
        "--objects",
        "1x10KB",
        "--connections",
        "1",
        "--rate",
        "200",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--link",
        "rate=10mbit",
        "--no-telemetry",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let run = run0(r.json.as_ref().unwrap());
    let load = &run["load"];
    let (late, own_late) = (
        load["late"].as_u64().unwrap(),
        load["client_late"].as_u64().unwrap(),
    );
    let sent = load["sent"].as_u64().unwrap();
    assert!(late > sent / 2, "{late} of {sent} late: {}", r.stderr);
    // The connection's wait is not the client's: at most a tenth of what is late is the
    // client's own, and its lag is a tenth of the whole. On a machine busy beside the test
    // (CI's kernel VM) the client may itself be late for a few percent of the requests,
    // and is then rightly called the limit; on time, it must not be.
    assert!(
        own_late * 10 <= late,
        "{own_late} of {late} late taken up late"
    );
    let p99 = |h: &Value| h["p99_us"].as_u64().unwrap();
    assert!(p99(&load["lag"]) > 100_000, "{}", load["lag"]);
    assert!(
        p99(&load["client_lag"]) * 10 < p99(&load["lag"]),
        "{} against {}",
        load["client_lag"],
        load["lag"]
    );
    let verdict = run["client"]["saturated"].as_str().unwrap_or("");
    if own_late * 100 <= sent {
        assert!(!verdict.contains("taken up"), "{verdict}");
    } else {
        assert!(
            verdict.contains("taken up"),
            "a late client is named: {verdict}"
        );
    }
    // The summary's line for the connection's wait is there whenever the client kept to its
    // schedule (its own p99 within the 2 ms that make a request late).
    if p99(&load["client_lag"]) <= 2_000 {
        assert!(
            r.stderr
                .contains("the rest waited for a stream or the connection"),
            "{}",
            r.stderr
        );
    }
}
