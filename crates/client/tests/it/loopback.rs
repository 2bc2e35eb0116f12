//! The client against the in-process matched server on loopback, for every protocol.

use crate::common;

use common::{assert_complete, qbench};

#[test]
fn many_small_objects_all_protocols() {
    for (proto, extra) in [
        ("h3", vec![]),
        ("h2", vec![]),
        ("h1", vec!["--connections", "6"]),
    ] {
        let mut args = vec!["--proto", proto, "--objects", "200x5KB"];
        args.extend(extra);
        assert_complete(&qbench(&args), 1, 200, 1_000_000);
    }
}

#[test]
fn mixed_sizes_over_several_connections_and_runs() {
    for proto in ["h3", "h2", "h1"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "10x100KB,1x1MB,2x0B",
            "--connections",
            "2",
            "--runs",
            "2",
        ]);
        assert_complete(&r, 2, 13, 2_000_000);
        let run0 = &r.json.as_ref().unwrap()["runs"][0];
        assert_eq!(run0["connections"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn stream_cap_and_large_object() {
    for proto in ["h3", "h2"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "1x3MiB,20x10KB",
            "--streams",
            "4",
        ]);
        assert_complete(&r, 1, 21, 3 * 1024 * 1024 + 200_000);
        let cfg = &r.json.as_ref().unwrap()["config"];
        assert_eq!(cfg["streams"], 4);
    }
}

#[test]
fn reuse_keeps_connections_warm() {
    for proto in ["h3", "h2"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "5x1KB",
            "--runs",
            "3",
            "--reuse",
        ]);
        assert_complete(&r, 3, 5, 5_000);
        let runs = r.json.as_ref().unwrap()["runs"].as_array().unwrap().clone();
        assert!(runs[0]["handshake_us"].as_u64().is_some());
        for later in &runs[1..] {
            assert!(later["handshake_us"].is_null(), "no new handshake: {later}");
        }
    }
}

#[test]
fn fresh_connections_do_not_resume_by_default() {
    let r = qbench(&["--proto", "h2", "--objects", "2x1KB", "--runs", "2"]);
    assert_complete(&r, 2, 2, 2_000);
    let c = &r.json.as_ref().unwrap()["runs"][1]["connections"][0];
    assert_eq!(c["resumption_offered"], false);
    assert_eq!(c["resumed"], false);
    assert!(c["handshake_us"].as_u64().is_some());
}

#[test]
fn tls_resumption_over_tcp() {
    let r = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "2x1KB",
        "--runs",
        "2",
        "--resume",
    ]);
    assert_complete(&r, 2, 2, 2_000);
    let runs = &r.json.as_ref().unwrap()["runs"];
    assert_eq!(runs[0]["connections"][0]["resumed"], false);
    assert_eq!(runs[1]["connections"][0]["resumption_offered"], true);
    assert_eq!(runs[1]["connections"][0]["resumed"], true);
}

#[test]
fn quic_zero_rtt_is_accepted_after_first_run() {
    let r = qbench(&[
        "--proto",
        "h3",
        "--objects",
        "3x2KB",
        "--runs",
        "2",
        "--0rtt",
    ]);
    assert_complete(&r, 2, 3, 6_000);
    let runs = &r.json.as_ref().unwrap()["runs"];
    assert_eq!(runs[0]["connections"][0]["early_data_accepted"], false);
    assert_eq!(runs[1]["connections"][0]["early_data_accepted"], true);
    assert_eq!(runs[1]["connections"][0]["alpn"], "h3");
    assert_eq!(r.json.as_ref().unwrap()["config"]["zero_rtt"], true);
}

#[test]
fn report_carries_environment_and_no_nan() {
    let r = qbench(&["--proto", "h3", "--objects", "1x1KB"]);
    assert_complete(&r, 1, 1, 1_000);
    let j = r.json.as_ref().unwrap();
    assert_eq!(
        j["environment"]["crates"]["quinn"]
            .as_str()
            .map(|s| s.starts_with("0.11")),
        Some(true)
    );
    // The HTTP/3 stack's version, whose QPACK sets h3's cost per small request.
    assert_eq!(
        j["environment"]["crates"]["http3"]
            .as_str()
            .map(|s| s.starts_with("0.2")),
        Some(true),
        "{}",
        j["environment"]["crates"]
    );
    assert!(j["environment"]["cores"].as_u64().unwrap() >= 1);
    assert!(j["environment"]["sysctls"]["net.core.rmem_max"].is_string());
    assert!(j["runs"][0]["cpu"]["server"]["user_s"].is_number());
    assert!(!serde_json::to_string(j).unwrap().contains("NaN"));
}

#[test]
fn verify_checks_every_byte_of_the_payload() {
    for proto in ["h3", "h2", "h1"] {
        let r = qbench(&["--proto", proto, "--objects", "3x300KB,5x1B", "--verify"]);
        assert_complete(&r, 1, 8, 900_005);
        assert_eq!(r.json.as_ref().unwrap()["config"]["verify"], true);
    }
}

/// Objects waiting for a stream (more requested at once than the server's 256 streams) are
/// not "no progress" while the connection moves: none times out, however long it waits. (h3
/// waits for stream credit in quinn; h2 at qbench's own gate. The old per-object timeout
/// cancelled requests queued in hyper by the thousand, until the server's rapid-reset guard
/// closed the connection.) No more requests are on the wire, and timed, than the server
/// allows, and the report records the limit it advertised.
///
/// The premise is checked, not assumed from the machine's speed: some object waited longer
/// than `--timeout` for its stream (the last object's wait is at least the run's span less its
/// own latency), else the count grows by what the wait fell short by (half as much again,
/// between 2 and 16 times, at most 64 times the first count), up to twice: a quiet machine
/// moved 6000 objects of 200 KB in 2 s. The timeout is 3 s, not 1: QUIC's idle timeout is the
/// same figure, and beside two busy loops and the rest of the suite a loopback connection has
/// once received nothing for a second.
#[test]
fn waiting_for_a_stream_is_not_a_timeout() {
    const TIMEOUT_US: u64 = 3_000_000;
    for (proto, first, size) in [("h3", 1500, 200_000), ("h2", 8000, 200_000)] {
        let mut waited = Vec::new();
        let mut n: u64 = first;
        for _ in 0..3 {
            let streams = n.to_string();
            let objects = format!("{n}x{}KB", size / 1000);
            let r = qbench(&[
                "--proto",
                proto,
                "--objects",
                &objects,
                "--streams",
                &streams,
                "--timeout",
                "3s",
                "--no-telemetry",
            ]);
            assert_complete(&r, 1, n, n * size);
            let run = &r.json.as_ref().unwrap()["runs"][0];
            let conn = &run["connections"][0];
            let limit = u64::from(qbench_core::wire::MAX_STREAMS);
            assert_eq!(conn["server_max_streams"].as_u64(), Some(limit), "{proto}");
            assert_eq!(conn["peak_streams"].as_u64(), Some(limit), "{proto}");
            let us = |k: &str| run[k].as_u64().unwrap();
            let span = us("last_byte_us").saturating_sub(us("first_request_us"));
            let wait = span.saturating_sub(run["object_latency"]["max_us"].as_u64().unwrap());
            waited.push((n, wait));
            if wait > TIMEOUT_US {
                break;
            }
            let grow = (TIMEOUT_US * 3 / 2).div_ceil(wait.max(1)).clamp(2, 16);
            // At most 64 times the first count (a quiet machine here needed 9 and 13).
            n = (n * grow).min(first * 64);
        }
        assert!(
            waited.iter().any(|&(_, w)| w > TIMEOUT_US),
            "{proto}: no object waited longer than the timeout (count, wait in us): {waited:?}"
        );
    }
}

/// Connections spread over sockets on both sides: each connection has a socket of its own (for
/// h3 a QUIC endpoint's), a two-thread server receives QUIC on two sockets of its port, and
/// every byte still arrives, checked.
#[test]
fn connections_spread_over_sockets_on_both_sides() {
    for proto in ["h3", "h2"] {
        let r = qbench(&[
            "--proto",
            proto,
            "--objects",
            "40x100KB",
            "--connections",
            "4",
            "--client-threads",
            "2",
            "--server-threads",
            "2",
            "--verify",
        ]);
        assert_complete(&r, 1, 40, 4_000_000);
        let run = &r.json.as_ref().unwrap()["runs"][0];
        let spread = &run["spread"];
        let ports: std::collections::BTreeSet<u64> = run["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["local_port"].as_u64().expect("a local port"))
            .collect();
        assert_eq!(ports.len(), 4, "{proto}: a socket per connection");
        assert_eq!(spread["client_sockets"], 4, "{proto}");
        assert_eq!(spread["client_threads"], 2, "{proto}");
        assert_eq!(spread["server_threads"], 2, "{proto}");
        // The in-process server serves the protocol measured: h2 binds no UDP.
        let udp = if proto == "h3" { 2 } else { 0 };
        assert_eq!(spread["server_udp_sockets"], udp, "{proto}");
        // Where the CPU went: the client's runtime (its 2 workers and the main thread) and the
        // server's 2 workers, each role's time within the process's own figures.
        let role = |name: &str| {
            spread["roles"]
                .as_array()
                .expect("roles")
                .iter()
                .find(|r| r["role"] == name)
                .unwrap_or_else(|| panic!("{proto}: no {name} role in {spread}"))
                .clone()
        };
        let (client, server) = (role("client"), role("server"));
        assert!(
            client["threads"].as_u64().unwrap() >= 3,
            "{proto}: {client}"
        );
        assert_eq!(server["threads"], 2, "{proto}: {server}");
        let cpu = &run["cpu"];
        for (r, total) in [(&client, &cpu["client"]), (&server, &cpu["server"])] {
            let total = total["user_s"].as_f64().unwrap() + total["sys_s"].as_f64().unwrap();
            let busy = r["cpu_s"].as_f64().unwrap();
            assert!(busy > 0.0, "{proto}: {r}");
            // getrusage counts in ticks of the scheduler's accounting; schedstat in ns.
            assert!(busy <= total + 0.05, "{proto}: {r} against {total} s");
        }
    }
    // More threads than connections: a thread per connection, no idle one.
    let r = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "4x10KB",
        "--connections",
        "2",
        "--client-threads",
        "3",
        "--verify",
    ]);
    assert_complete(&r, 1, 4, 40_000);
    assert_eq!(
        r.json.as_ref().unwrap()["runs"][0]["spread"]["client_threads"],
        2
    );
}
