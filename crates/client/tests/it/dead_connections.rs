//! A connection that dies mid-run without a GOAWAY (an idle timeout, a reset): the requests
//! it had in flight fail, and the requests after them go on a new connection instead of each
//! failing at once on the dead one. Peers are an in-process server, a forwarder this test
//! owns, and quic-go's HTTP/3 server, on loopback.

use crate::common;

use std::thread;
use std::time::{Duration, Instant};

use common::forward;
use common::needs::{require, Need};
use common::{qbench, Run};
use qbench_core::Protocol;
use qbench_server::stall::StallSpec;
use qbench_server::{InProcess, ServerOptions};
use serde_json::Value;

const OBJECTS: u64 = 400;
const CONNECTIONS: u64 = 2;
const STREAMS: u64 = 4;

fn run(proto: &str, port: u16) -> Run {
    run_timing_out(proto, port, "5s")
}

/// `run` with the client's `--timeout`.
fn run_timing_out(proto: &str, port: u16, timeout: &str) -> Run {
    let (objects, connections, streams) = (
        format!("{OBJECTS}x1KB"),
        CONNECTIONS.to_string(),
        STREAMS.to_string(),
    );
    qbench_at(
        proto,
        port,
        &[
            "--objects",
            &objects,
            "--connections",
            &connections,
            "--streams",
            &streams,
            "--timeout",
            timeout,
        ],
    )
}

/// qbench over `proto` against the server on loopback's `port`, with `args` after those.
fn qbench_at(proto: &str, port: u16, args: &[&str]) -> Run {
    let target = format!("https://127.0.0.1:{port}");
    let mut all = vec!["--proto", proto, "--target", &target, "--insecure"];
    all.extend_from_slice(args);
    qbench(&all)
}

/// The run's counts: failed objects only of `kind`, at most `deaths` connections' requests
/// in flight, every other object complete, and at least one connection replaced.
fn assert_replaced(r: &Run, proto: &str, kind: &str, deaths: u64) -> Value {
    assert_replaced_sending(r, proto, kind, deaths, STREAMS)
}

/// `assert_replaced` where a connection sends at most `sent` requests at a time.
fn assert_replaced_sending(r: &Run, proto: &str, kind: &str, deaths: u64, sent: u64) -> Value {
    let run0 = r.json.as_ref().expect("JSON report")["runs"][0].clone();
    let objects = &run0["objects"];
    let failed = objects["failed"].as_u64().unwrap();
    assert!(
        failed <= deaths * sent,
        "{proto}: {failed} failed, more than {deaths} connections had in flight: {run0}"
    );
    assert_eq!(
        objects["completed"].as_u64().unwrap() + failed,
        OBJECTS,
        "{proto}: {run0}"
    );
    let errors = run0["errors"].as_object().unwrap();
    assert!(
        errors.keys().all(|k| k == kind),
        "{proto}: only {kind}: {errors:?}"
    );
    assert!(reopened(&run0) >= 1, "{proto}: nothing reopened: {run0}");
    run0
}

/// Connections of a run opened in place of closed ones.
fn reopened(run0: &Value) -> usize {
    run0["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reopened"] == true)
        .count()
}

#[test]
fn a_connection_the_quic_idle_timeout_ended_is_replaced() {
    // The server's QUIC idle timeout (0.5 s, below the client's 5 s) ends each connection
    // while responses wait out the 1.5 s stall from the first request: two or three deaths
    // per connection, four allowed for a loaded machine.
    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H3];
    opts.idle_timeout = Duration::from_millis(500);
    opts.stall = Some(StallSpec {
        after: Duration::ZERO,
        length: Duration::from_millis(1500),
    });
    let server = InProcess::start(opts, 1).unwrap();
    let r = run("h3", server.local_addr().port());
    let run0 = assert_replaced(&r, "h3", "timeout", 4 * CONNECTIONS);
    assert!(run0["objects"]["retried"].as_u64().unwrap() >= 1, "{run0}");
}

#[test]
fn an_h2_connection_silent_past_the_timeout_is_replaced() {
    // As QUIC's idle timeout (the client's --timeout) ends an HTTP/3 connection on which
    // nothing moves, a request that times out with nothing moving on its HTTP/2 connection
    // ends it, and the requests after go on a new one; TCP alone would keep it for minutes.
    // The stall (1.5 s from the first request) outlasts the timeout (0.5 s) two or three
    // times per connection; four allowed for a loaded machine.
    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H2];
    opts.stall = Some(StallSpec {
        after: Duration::ZERO,
        length: Duration::from_millis(1500),
    });
    let server = InProcess::start(opts, 1).unwrap();
    let r = run_timing_out("h2", server.local_addr().port(), "500ms");
    let run0 = assert_replaced(&r, "h2", "timeout", 4 * CONNECTIONS);
    // Requests the ended connection had sent fail as what ended it.
    let first = run0["first_error"].as_str().unwrap_or_default();
    assert!(first.contains("no progress for 500ms"), "{first}");
}

#[test]
fn streams_the_server_refuses_go_again_on_the_same_connection() {
    // The server allows 2 streams per connection and the client asks for 16. Its SETTINGS,
    // held 50 ms on the way, come after the client's first 16 requests, of which it refuses
    // 14 (REFUSED_STREAM) and keeps the connection: they go again on it, now that the limit
    // is known. On a new connection they would meet the same limit before its SETTINGS,
    // and so on, each request failing after 9 connections.
    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H2];
    opts.max_streams = 2;
    let server = InProcess::start(opts, 1).unwrap();
    let port = forward::forwarder(server.local_addr().port(), None, Duration::from_millis(50)).port;
    let args = [
        "--objects",
        "400x1KB",
        "--connections",
        "2",
        "--streams",
        "16",
    ];
    let r = qbench_at("h2", port, &args);
    let run0 = r.json.as_ref().expect("JSON report")["runs"][0].clone();
    assert_eq!(run0["objects"]["completed"], OBJECTS, "{run0}");
    assert_eq!(reopened(&run0), 0, "{run0}");
    let retried = run0["objects"]["retried"].as_u64().unwrap();
    assert!((14..=2 * 14).contains(&retried), "{run0}");
    let connections = run0["connections"].as_array().unwrap();
    assert!(
        connections.iter().all(|c| c["server_max_streams"] == 2),
        "{run0}"
    );
}

#[test]
fn an_h2_connection_cut_without_a_goaway_is_replaced() {
    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H2];
    let server = InProcess::start(opts, 1).unwrap();
    // 40 KB in: past the handshake and some 30 responses, with the run's rest to go.
    let port = forward::forwarder(server.local_addr().port(), Some(40_000), Duration::ZERO).port;
    let r = run("h2", port);
    assert_replaced(&r, "h2", "reset", 1);
}

#[test]
fn a_connection_quic_gos_idle_timeout_ended_is_replaced() {
    require!(Need::Tool("go"));
    // A stack nobody here wrote: quic-go's server ends a connection 200 ms after its last
    // packet, without a word, as QUIC's idle timeout does. Requests a second apart each find
    // the connection gone before they are sent and go on a new one. One may fail as a timeout
    // where a slow handshake stretched the client's own idle timer (three probe timeouts)
    // past the gap, so that it sent the request on a connection quic-go had dropped.
    let bin = common::go_build("servers/quicgo", "qbench-quicgo-server");
    let server = format!(
        "exec:{} -addr {{addr}}:{{port}} -cert {{cert}} -key {{key}} -root {{root}} -idle 200ms",
        bin.display()
    );
    let r = qbench(&[
        "--server",
        &server,
        "--proto",
        "h3",
        "--objects",
        "1x1KB",
        "--connections",
        "1",
        "--rate",
        "1",
        "--duration",
        "4s",
        "--timeout",
        "5s",
    ]);
    let run0 = r.json.as_ref().expect("JSON report")["runs"][0].clone();
    let objects = &run0["objects"];
    let (completed, failed) = (
        objects["completed"].as_u64().unwrap(),
        objects["failed"].as_u64().unwrap(),
    );
    assert_eq!(completed + failed, 4, "{run0}");
    assert!(failed <= 1, "{run0}");
    let errors = run0["errors"].as_object().unwrap();
    assert!(errors.keys().all(|k| k == "timeout"), "{errors:?}");
    assert!(reopened(&run0) >= 2, "{run0}");
    assert!(objects["retried"].as_u64().unwrap() >= 2, "{run0}");
    assert_eq!(run0["server_program"]["name"], "exec", "{run0}");
}

#[test]
fn a_server_gone_mid_run_is_tried_once_a_second_per_connection() {
    // The server's runtime ends 1.5 s into a 4 s held load: its connections are reset and
    // every handshake after it is refused at once. Each connection tries again a second after
    // its last attempt failed, and its requests wait for that attempt and fail with it, so
    // the run counts tens of refusals, not a closed loop's worth of them per second.
    for proto in ["h2", "h1"] {
        let mut opts = ServerOptions::loopback();
        opts.protocols = vec![if proto == "h2" {
            Protocol::H2
        } else {
            Protocol::H1
        }];
        let server = InProcess::start(opts, 1).unwrap();
        let port = server.local_addr().port();
        let streams = if proto == "h2" { STREAMS } else { 1 };
        let run = thread::spawn(move || {
            let mut args = vec![
                "--objects",
                "10x1KB",
                "--connections",
                "2",
                "--duration",
                "4s",
                "--warmup",
                "0s",
                "--timeout",
                "5s",
            ];
            if proto == "h2" {
                args.extend(["--streams", "4"]);
            }
            let began = Instant::now();
            (qbench_at(proto, port, &args), began.elapsed())
        });
        thread::sleep(Duration::from_millis(1500));
        drop(server);
        let (r, took) = run.join().unwrap();
        let run0 = r.json.as_ref().expect("JSON report")["runs"][0].clone();
        let errors = run0["errors"].as_object().unwrap();
        let refused = errors.get("refused").and_then(Value::as_u64).unwrap_or(0);
        let failed = run0["objects"]["failed"].as_u64().unwrap();
        let attempts = run0["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["reopened"] == true && c["error"] == "refused")
            .count() as u64;
        // At most one attempt a second per connection over the 2.5 s left and the pause of
        // the requests in flight at the end: 4 each, allowing for a slow start.
        assert!((2..=8).contains(&attempts), "{proto}: {attempts}: {run0}");
        // Per connection: those in flight as the server went (and any sent before its close
        // was seen), a round for each attempt, and those waiting when the run ended: under 10
        // rounds, where a loop unpaced fails them as fast as a refused connect returns
        // (millions).
        assert!(
            failed <= 10 * 2 * streams,
            "{proto}: {failed} failed after {attempts} attempts: {errors:?}"
        );
        assert!(refused >= attempts, "{proto}: {errors:?}");
        assert!(took < Duration::from_secs(8), "{proto}: {took:?}");
    }
}

#[test]
fn requests_waiting_for_a_stream_on_a_silent_h2_connection_go_on_the_next() {
    // The server allows 2 streams per connection where the client asks for 32, and stalls
    // from 300 ms to 1.8 s: each time the connection is ended for its silence (0.5 s), its
    // 2 requests sent fail and the 30 waiting for a stream, never handed to h2, go on the new
    // connection, whichever request's timer fired first.
    let mut opts = ServerOptions::loopback();
    opts.protocols = vec![Protocol::H2];
    opts.max_streams = 2;
    opts.stall = Some(StallSpec {
        after: Duration::from_millis(300),
        length: Duration::from_millis(1500),
    });
    let server = InProcess::start(opts, 1).unwrap();
    let args = [
        "--objects",
        "10x1KB",
        "--connections",
        "8",
        "--streams",
        "32",
        "--duration",
        "2500ms",
        "--warmup",
        "0s",
        "--timeout",
        "500ms",
    ];
    let r = qbench_at("h2", server.local_addr().port(), &args);
    let run0 = r.json.as_ref().expect("JSON report")["runs"][0].clone();
    let errors = run0["errors"].as_object().unwrap();
    assert!(errors.keys().all(|k| k == "timeout"), "{errors:?}");
    let (failed, deaths) = (run0["objects"]["failed"].as_u64().unwrap(), reopened(&run0));
    assert!(deaths >= 8, "each connection died at least once: {run0}");
    // The 2 sent on each connection that died, and 2 more per connection for one that died
    // as the stall ended; where the waiting requests failed with them, 14 more per death.
    assert!(
        failed <= 2 * (deaths as u64 + 8),
        "{failed} failed over {deaths} deaths: {run0}"
    );
    assert!(
        run0["objects"]["retried"].as_u64().unwrap() >= 30 * deaths as u64,
        "{run0}"
    );
}
