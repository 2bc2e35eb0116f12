//! A held load against servers that allow fewer streams than it asks for: qbench's own, nginx
//! allowing 2 HTTP/2 streams per connection, and quic-go granting 2 bidirectional QUIC streams.
//! The requests above the limit wait in the client (qbench's stream gate on h2, quinn's wait
//! for stream credit on h3); at the load's end they are dropped unsent, so that no request
//! goes out after the end but those whose stream freed as the end fell. Before, the whole
//! queue (60 here) went out after it and counted, stretching the run.

use crate::common;
use crate::nginx_interop::{nginx, run, Ports};

use common::needs::{require, Need};
use common::Run;
use serde_json::Value;
use std::path::Path;

/// A 1 s held load over 2 connections asking for 32 streams each, logging its requests.
fn held(log: &str) -> [&str; 8] {
    [
        "--duration",
        "1s",
        "--connections",
        "2",
        "--streams",
        "32",
        "--log-requests",
        log,
    ]
}

/// At most the places that freed as the end fell carried requests after the load's end, by
/// the request log's send times, checked against the report: every request logged is
/// counted, warm-up included, and none failed. The run, for further checks.
fn few_sent_after_the_end<'a>(r: &'a Run, log: &Path, what: &str) -> &'a Value {
    assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
    let run0: &Value = &r.json.as_ref().expect("JSON report")["runs"][0];
    let load = &run0["load"];
    let end = load["window_start_us"].as_u64().unwrap() + load["window_us"].as_u64().unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    let sent: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| l.split('\t').nth(4).unwrap().parse().unwrap())
        .collect();
    assert_eq!(run0["objects"]["failed"], 0, "{what}: {run0}");
    let warm = load["warmup_requests"].as_u64().unwrap();
    assert_eq!(
        run0["objects"]["completed"].as_u64().unwrap() + warm,
        sent.len() as u64,
        "{what}: every request logged was counted"
    );
    assert!(
        run0["objects"]["completed"].as_u64().unwrap() > 10,
        "{what}: {run0}"
    );
    let late = sent.iter().filter(|&&s| s > end).count();
    assert!(late <= 4, "{what}: {late} requests sent after the end");
    run0
}

/// The in-process server allowing 2 streams, on h2 and h3.
#[test]
fn requests_queued_for_a_stream_are_not_sent_after_the_end() {
    let mut opts = qbench_server::ServerOptions::loopback();
    opts.protocols = vec![qbench_core::Protocol::H2, qbench_core::Protocol::H3];
    opts.max_streams = 2;
    let server = qbench_server::InProcess::start(opts, 1).unwrap();
    let target = format!("https://127.0.0.1:{}", server.local_addr().port());
    let dir = tempfile::tempdir().unwrap();
    for proto in ["h2", "h3"] {
        let log = dir.path().join(format!("{proto}.tsv"));
        let what = ["--proto", proto, "--target", &target, "--insecure"];
        let more = ["--objects", "1x1MB"];
        let r = common::qbench(&[&what[..], &more, &held(log.to_str().unwrap())].concat());
        let run0 = few_sent_after_the_end(&r, &log, proto);
        let peak = run0["connections"][0]["peak_streams"].as_u64().unwrap();
        assert!(
            peak <= 2 || proto == "h2",
            "{proto}: {peak} streams at once"
        );
    }
}

/// nginx turns away the first flight's streams above its limit (REFUSED_STREAM, before its
/// SETTINGS arrive); those go again, early. At the end 30 requests per connection wait at the
/// gate; at most the two places per connection that free as the end falls are taken after it.
#[test]
fn requests_waiting_for_nginxs_streams_are_not_sent_after_the_end() {
    require!(Need::Tool("nginx"));
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, Ports { narrow, .. }) = nginx(dir.path(), 1_000_000);
    let cert = dir.path().join("cert.pem");
    let log = dir.path().join("requests.tsv");
    let r = run("h2", narrow, &cert, &held(log.to_str().unwrap()));
    let run0 = few_sent_after_the_end(&r, &log, "nginx h2");
    for c in run0["connections"].as_array().unwrap() {
        assert_eq!(c["server_max_streams"], 2, "{run0}");
    }
}

/// quic-go grants 2 bidirectional streams at a time and more only as each one ends; the
/// client's requests above that wait inside quinn for credit, and are dropped there at the end.
#[test]
fn requests_waiting_for_quic_gos_stream_credit_are_not_sent_after_the_end() {
    require!(Need::Tool("go"));
    let bin = common::go_build("servers/quicgo", "qbench-quicgo-server");
    let server = format!(
        "exec:{} -addr {{addr}}:{{port}} -cert {{cert}} -key {{key}} -root {{root}} -max-streams 2",
        bin.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.tsv");
    let what = ["--server", &server, "--proto", "h3", "--objects", "1x100KB"];
    let r = common::qbench(&[&what[..], &held(log.to_str().unwrap())].concat());
    let run0 = few_sent_after_the_end(&r, &log, "quic-go h3");
    for c in run0["connections"].as_array().unwrap() {
        let peak = c["peak_streams"].as_u64().unwrap();
        assert!(peak <= 2, "quic-go h3: {peak} streams at once: {run0}");
    }
}
