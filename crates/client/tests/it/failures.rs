//! Runs that start but fail: the error kind is counted, the partial report is written, and
//! the exit status is non-zero. Peers here are loopback sockets this test owns.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{assert_failed_with, qbench};
use qbench_core::Protocol;
use qbench_server::{InProcess, ServerOptions};

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn refused_connection() {
    let port = free_tcp_port();
    let target = format!("https://127.0.0.1:{port}");
    for proto in ["h2", "h1"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--target",
            &target,
            "--insecure",
            "--runs",
            "3",
        ]);
        assert_failed_with(&r, "refused");
        let j = r.json.unwrap();
        assert_eq!(j["runs"].as_array().unwrap().len(), 1, "later runs skipped");
        assert_eq!(j["runs"][0]["objects"]["not_started"], 200);
        assert!(j["aborted"].is_string());
    }
}

#[test]
fn certificate_not_trusted() {
    let server = InProcess::start(ServerOptions::loopback(), 1).unwrap();
    let target = format!("https://127.0.0.1:{}", server.local_addr().port());
    for proto in ["h3", "h2"] {
        // No --ca: the generated certificate is not in the system store.
        let r = qbench(&["--proto", proto, "--target", &target, "--objects", "1x1KB"]);
        assert_failed_with(&r, "tls");
    }
}

#[test]
fn insecure_is_loud_and_recorded() {
    let server = InProcess::start(ServerOptions::loopback(), 1).unwrap();
    let target = format!("https://127.0.0.1:{}", server.local_addr().port());
    let r = qbench(&[
        "--proto",
        "h3",
        "--target",
        &target,
        "--objects",
        "2x1KB",
        "--insecure",
    ]);
    common::assert_complete(&r, 1, 2, 2_000);
    assert_eq!(r.json.unwrap()["config"]["insecure"], true);
    assert!(r.stderr.contains("NOT verified"), "{}", r.stderr);
}

#[test]
fn alpn_mismatch() {
    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H1, Protocol::H3];
    let server = InProcess::start(opts, 1).unwrap();
    let target = format!("https://127.0.0.1:{}", server.local_addr().port());
    let r = qbench(&[
        "--proto",
        "h2",
        "--target",
        &target,
        "--insecure",
        "--objects",
        "1x1KB",
    ]);
    assert_failed_with(&r, "alpn");

    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H2];
    let server = InProcess::start(opts, 1).unwrap();
    let target = format!("https://127.0.0.1:{}", server.local_addr().port());
    let r = qbench(&[
        "--proto",
        "h1",
        "--target",
        &target,
        "--insecure",
        "--objects",
        "1x1KB",
    ]);
    assert_failed_with(&r, "alpn");
}

#[test]
fn silent_peers_time_out() {
    // Accepts TCP and never speaks TLS.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    // The connection is held until qbench has ended, however late its timer fires: closed
    // any sooner, it would fail as a reset, not a timeout.
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        let (_conn, _) = tcp.accept().unwrap();
        let _ = ended.recv();
    });
    let target = format!("https://127.0.0.1:{port}");
    let r = qbench(&[
        "--proto",
        "h2",
        "--target",
        &target,
        "--insecure",
        "--timeout",
        "300ms",
    ]);
    drop(done);
    assert_failed_with(&r, "timeout");
    holder.join().unwrap();

    // A UDP socket that never answers a QUIC Initial.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = format!("https://127.0.0.1:{}", udp.local_addr().unwrap().port());
    let r = qbench(&[
        "--proto",
        "h3",
        "--target",
        &target,
        "--insecure",
        "--timeout",
        "300ms",
    ]);
    assert_failed_with(&r, "timeout");
}

/// A TLS HTTP/1.1 peer that answers every request with `respond(path)` and then closes.
struct Faulty {
    port: u16,
    ca: String,
    _dir: tempfile::TempDir,
}

impl Faulty {
    fn start(respond: fn(&str) -> Vec<u8>) -> Self {
        let (port, dir) = faulty_h1_server(respond);
        let ca = dir.path().join("ca.pem").to_str().unwrap().to_string();
        Self {
            port,
            ca,
            _dir: dir,
        }
    }

    /// `qbench --proto h1 --ca CA ARGS`.
    fn h1(&self, args: &[&str]) -> common::Run {
        qbench(&[&["--proto", "h1", "--ca", &self.ca], args].concat())
    }

    /// `--target` with `--objects OBJECTS` against this peer.
    fn objects(&self, objects: &str, extra: &[&str]) -> common::Run {
        let target = format!("https://127.0.0.1:{}", self.port);
        self.h1(&[&["--target", &target, "--objects", objects], extra].concat())
    }
}

/// The length a `/bytes/{n}` path asks for.
fn requested(path: &str) -> usize {
    path.trim_start_matches("/bytes/").parse().unwrap_or(0)
}

fn faulty_h1_server(respond: fn(&str) -> Vec<u8>) -> (u16, tempfile::TempDir) {
    let id = qbench_server::Identity::self_signed(&[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), &id.pem).unwrap();
    let cfg =
        qbench_server::tls::server_config(&id, vec![b"http/1.1".to_vec()], false, None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(Arc::clone(&cfg)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut reader = BufReader::new(&mut tls);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok() && line != "\r\n" && !line.is_empty() {
                line.clear();
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .to_string();
            let _ = tls.write_all(&respond(&path));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (port, dir)
}

fn head(len: usize) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n").into_bytes()
}

#[test]
fn short_and_long_bodies_are_errors() {
    // Announces the requested length but closes halfway.
    let peer = Faulty::start(|path| {
        let n = requested(path);
        let mut v = head(n);
        v.extend(std::iter::repeat_n(b'x', n / 2));
        v
    });
    let r = peer.objects("1x1000B", &[]);
    assert_failed_with(&r, "short_body");
    assert_eq!(r.json.unwrap()["runs"][0]["payload_bytes"], 500);

    // Sends more than was asked for.
    let peer = Faulty::start(|path| {
        let n = requested(path);
        let mut v = head(n + 10);
        v.extend(std::iter::repeat_n(b'x', n + 10));
        v
    });
    assert_failed_with(&peer.objects("1x1000B", &[]), "long_body");

    // Arbitrary URLs are checked against content-length.
    let peer = Faulty::start(|_| {
        let mut v = head(100);
        v.extend(std::iter::repeat_n(b'x', 40));
        v
    });
    let url = format!("https://127.0.0.1:{}/file", peer.port);
    assert_failed_with(&peer.h1(&["--url", &url]), "short_body");
}

#[test]
fn http_error_status_is_counted() {
    let server = InProcess::start(ServerOptions::loopback(), 1).unwrap();
    let url = format!("https://127.0.0.1:{}/missing", server.local_addr().port());
    for proto in ["h3", "h2", "h1"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--url",
            &url,
            "--insecure",
            "--repeat",
            "3",
        ]);
        assert_failed_with(&r, "status");
        assert_eq!(r.json.unwrap()["summary"]["errors"]["status"], 3);
    }
}

#[test]
fn verify_catches_wrong_content() {
    // Right length, wrong bytes.
    let peer = Faulty::start(|path| {
        let n = requested(path);
        let mut v = head(n);
        v.extend(std::iter::repeat_n(b'x', n));
        v
    });
    let plain = peer.objects("1x100B", &[]);
    assert_eq!(
        plain.code,
        Some(0),
        "without --verify only sizes are checked"
    );
    let r = peer.objects("1x100B", &["--verify"]);
    assert_failed_with(&r, "body_mismatch");
}

/// Waits (bounded) until `json` exists: the report is rewritten after each run, so from then
/// on runs are under way.
fn first_run_done(json: &std::path::Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !json.exists() {
        assert!(std::time::Instant::now() < deadline, "no run finished");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_report_that_cannot_be_written_at_the_end_is_kept_and_the_summary_shown() {
    let dir = tempfile::tempdir().unwrap();
    let (out_dir, tmp) = (dir.path().join("out"), dir.path().join("tmp"));
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let json = out_dir.join("r.json");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args([
            "--proto",
            "h2",
            "--objects",
            "1x20MB",
            "--runs",
            "40",
            "--json",
        ])
        .arg(&json)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    first_run_done(&json);
    // The directory goes away under the running benchmark, in one step (a rename, which
    // succeeds whatever it holds, where removing it could race with a run's report being
    // written into it).
    std::fs::rename(&out_dir, dir.path().join("gone")).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("objects"), "the summary is shown: {stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kept: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        stderr.contains(&*kept[0].to_string_lossy()),
        "the error names it: {stderr}"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&kept[0]).unwrap()).unwrap();
    assert_eq!(r["runs"].as_array().unwrap().len(), 40);
}
