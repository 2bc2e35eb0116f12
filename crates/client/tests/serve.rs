//! `qbench serve` as a separate process: a remote-style server benchmarked with --target and
//! --ca, that cleans up its certificate on SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{assert_complete, qbench};

#[test]
fn serve_then_benchmark_by_target_and_ca() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let mut child = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--cert-out"])
        .arg(&cert)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    // "qbench-server listening on 127.0.0.1:PORT (h1,h2,h3); certificate for --ca: PATH"
    let addr = line
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    assert!(cert.exists(), "certificate written");
    let target = format!("https://{addr}");
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
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!cert.exists(), "certificate removed on exit");
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
