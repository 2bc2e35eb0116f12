//! `qbench serve` as a separate process: a remote-style server benchmarked with --target and
//! --ca, that cleans up its certificate on SIGTERM.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{assert_complete, qbench, Served};
use qbench_server::standalone::WORKER_NAME;

#[test]
fn serve_then_benchmark_by_target_and_ca() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    // One worker serves all three protocols.
    let server = Served::start(&["--threads", "1"], &cert);
    assert!(cert.exists(), "certificate written");
    assert_eq!(server.threads_named(WORKER_NAME, 1), 1);
    let target = server.target.clone();
    for proto in ["h3", "h2", "h1"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--target",
            &target,
            "--ca",
            cert.to_str().unwrap(),
            "--objects",
            "20x10KB",
            "--verify",
        ]);
        assert_complete(&r, 1, 20, 200_000);
        assert!(
            r.json.unwrap()["runs"][0]["cpu"]["server"].is_null(),
            "remote server CPU unknown"
        );
    }
    assert!(server.stop(), "clean exit on SIGTERM");
    assert!(!cert.exists(), "certificate removed on exit");
}

#[test]
fn a_thread_count_out_of_range_is_refused_naming_the_flag() {
    for bad in ["0", "1025"] {
        let out = Command::new(env!("CARGO_BIN_EXE_qbench"))
            .args(["serve", "--threads", bad])
            .output()
            .expect("qbench runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains("--threads"), "{stderr}");
    }
}

#[test]
fn a_token_server_serves_telemetry_to_the_token_only() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let mut child = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--telemetry", "token"])
        .arg("--cert-out")
        .arg(&cert)
        .env_remove("QBENCH_TELEMETRY_TOKEN")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    stderr.read_line(&mut first).unwrap();
    stderr.read_line(&mut second).unwrap();
    let addr = first.split_whitespace().nth(3).unwrap().to_string();
    let token = second
        .trim()
        .strip_prefix("telemetry token (qbench --telemetry-token): ")
        .unwrap_or_else(|| panic!("no token line: {second}"))
        .to_string();
    let target = format!("https://{addr}");
    let base = [
        "--proto",
        "h2",
        "--target",
        &target,
        "--ca",
        cert.to_str().unwrap(),
        "--objects",
        "4x10KB",
    ];
    let with = qbench(&[&base[..], &["--telemetry-token", &token]].concat());
    assert_complete(&with, 1, 4, 40_000);
    let j = with.json.unwrap();
    assert!(
        j["runs"][0]["telemetry"][0]["samples"].is_array(),
        "telemetry with the token"
    );
    let command = j["command"].to_string();
    assert!(
        !command.contains(&token),
        "the token stays out of the report: {command}"
    );
    let without = qbench(&base);
    assert_complete(&without, 1, 4, 40_000);
    assert!(without.json.unwrap()["runs"][0]["telemetry"].is_null());
    assert!(without.stderr.contains("401"), "{}", without.stderr);
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

/// Ten thousand connections on every protocol: h1 and h2 against `qbench serve` in its own
/// process (their two ends would not fit one process's 20,000 descriptors here), h3 against
/// the in-process server (one UDP socket a side). Every connection is made and used.
#[test]
fn ten_thousand_connections() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let server = Served::start(
        &["--max-connections", "20000", "--handshake-timeout", "300s"],
        &cert,
    );
    // A budget, not a figure: debug builds on two cores take tens of seconds to shake hands
    // ten thousand times, and a request that makes no progress for 120 s fails the run.
    let many = [
        "--connections",
        "10000",
        "--objects",
        "10000x1KB",
        "--client-threads",
        "2",
        "--server-threads",
        "2",
        "--timeout",
        "120s",
        "--no-telemetry",
    ];
    let remote = ["--target", &server.target, "--ca", cert.to_str().unwrap()];
    for (proto, at) in [("h1", &remote[..]), ("h2", &remote[..]), ("h3", &[][..])] {
        let args = [&["--proto", proto][..], &many, at].concat();
        // A run whose only errors are timeouts (and the server's handshake timeout, which
        // closes such a connection as a protocol error) is tried once more, and the second is
        // held to everything. Beside two busy loops and the rest of the suite, 256 QUIC
        // handshakes at once queue for seconds at the starved server: the client sends its
        // Initial twice more (and RFC 9002 keeps that backoff through the server's Initial
        // ACK), its first RTT sample is about 5 s, and when the datagram with its Finished is
        // lost (the server's qlog never shows it), its next probe is due 4 x (5 + 4 x 2.5) s
        // = 60 s later, then 120 s after that; the server, its own flight acknowledged, waits
        // in silence as it should. (qlogs of both sides of a run of 10,000 whose 400 requests
        // stalled so.) qbench ends the run itself; the harness only waits longer.
        let mut r = common::qbench_report_within(&args, &[], 900);
        let timeouts = |r: &common::Run| {
            r.json.as_ref().is_some_and(|j| {
                let e = j["runs"][0]["errors"].as_object();
                e.is_some_and(|e| e.keys().all(|k| k == "timeout" || k == "protocol"))
            })
        };
        if r.code == Some(1) && timeouts(&r) {
            eprintln!(
                "{proto}: stalled on a busy machine, tried once more:\n{}",
                r.stderr
            );
            r = common::qbench_report_within(&args, &[], 900);
        }
        assert_complete(&r, 1, 10_000, 10_000_000);
        let conns = r.json.as_ref().unwrap()["runs"][0]["connections"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(conns.len(), 10_000, "{proto}");
        assert!(conns
            .iter()
            .all(|c| c["handshake_us"].is_u64() && c["peak_streams"] == 1));
    }
    assert!(server.stop());
}
