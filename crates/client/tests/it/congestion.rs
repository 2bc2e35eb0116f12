//! Congestion control, window caps and sender telemetry against the in-process server.

use crate::common;

use common::needs::{require, Need};
use common::{assert_complete, qbench};
use serde_json::Value;

fn samples(run: &Value) -> Vec<Value> {
    run["telemetry"]
        .as_array()
        .expect("telemetry present")
        .iter()
        .flat_map(|t| t["samples"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn quic_cwnd_cap_holds_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("states.dot");
    let svg = dir.path().join("cwnd.svg");
    let r = qbench(&[
        "--proto",
        "h3",
        "--objects",
        "1x20MB",
        "--cwnd-cap",
        "20",
        "--state-graph",
        dot.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_complete(&r, 1, 1, 20_000_000);
    let run = &r.json.as_ref().unwrap()["runs"][0];
    let t = &run["telemetry"][0];
    let cap = t["cwnd_cap_bytes"].as_u64().unwrap();
    let s = samples(run);
    assert!(s.len() >= 2);
    let mss = s.last().unwrap()["mss_bytes"].as_u64().unwrap();
    assert_eq!(cap, 20 * mss);
    for x in &s {
        assert!(
            x["cwnd_bytes"].as_u64().unwrap() <= cap,
            "cwnd above cap: {x}"
        );
    }
    assert!(
        run["cc_states"]["time_fraction"]["CaMaxed"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let dot = std::fs::read_to_string(dot).unwrap();
    assert!(
        dot.starts_with("digraph") && dot.contains("CA-Maxed"),
        "{dot}"
    );
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("<polyline") && svg.contains("cwnd cap"));
}

#[test]
fn cc_choice_reaches_both_stacks() {
    require!(Need::TcpCc("bbr"), Need::TcpCc("cubic"));
    for (proto, cc, reported) in [
        ("h3", "newreno", "newreno"),
        ("h3", "bbr", "bbr"),
        ("h2", "newreno", "reno"),
        ("h1", "cubic", "cubic"),
        ("h2", "bbr", "bbr"),
    ] {
        let r = qbench(&["--proto", proto, "--objects", "1x2MB", "--cc", cc]);
        assert_complete(&r, 1, 1, 2_000_000);
        let j = r.json.as_ref().unwrap();
        assert_eq!(j["config"]["cc"], cc);
        let t = &j["runs"][0]["telemetry"][0];
        assert_eq!(t["cc"], reported, "{proto} {cc}");
        assert_eq!(t["transport"], if proto == "h3" { "quic" } else { "tcp" });
    }
}

#[test]
fn tcp_telemetry_comes_from_tcp_info() {
    let r = qbench(&["--proto", "h2", "--objects", "1x20MB", "--runs", "2"]);
    assert_complete(&r, 2, 1, 20_000_000);
    for run in r.json.as_ref().unwrap()["runs"].as_array().unwrap() {
        let s = samples(run);
        let last = s.last().unwrap();
        // The final sample is taken after the object was sent: all of it left the socket.
        assert!(last["bytes_sent"].as_u64().unwrap() >= 20_000_000, "{last}");
        assert!(last["tcp_ca_state"].is_u64());
        assert!(last["mss_bytes"].as_u64().unwrap() > 0);
        let total: f64 = run["cc_states"]["time_fraction"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-6);
    }
}

#[test]
fn receive_window_caps_bytes_in_flight() {
    let rwnd = 128 * 1024u64;
    for proto in ["h3", "h2"] {
        let r = qbench(&["--proto", proto, "--objects", "1x10MB", "--rwnd", "128KiB"]);
        assert_complete(&r, 1, 1, 10_000_000);
        let run = &r.json.as_ref().unwrap()["runs"][0];
        for x in samples(run) {
            let f = x["in_flight_bytes"].as_u64().unwrap();
            // Flow control bounds payload; packet, frame and TLS overhead come on top.
            assert!(
                f as f64 <= rwnd as f64 * 1.06 + 1500.0,
                "{proto}: {f} bytes in flight: {x}"
            );
        }
    }
    let r = qbench(&["--proto", "h1", "--objects", "1x2MB", "--rwnd", "128KiB"]);
    assert_complete(&r, 1, 1, 2_000_000);
    assert_eq!(r.json.unwrap()["config"]["rwnd"], rwnd);
}

#[test]
fn telemetry_can_be_turned_off() {
    for flag in [&["--no-telemetry"][..], &["--sample-interval", "0s"][..]] {
        let mut args = vec!["--proto", "h3", "--objects", "2x10KB"];
        args.extend_from_slice(flag);
        let r = qbench(&args);
        assert_complete(&r, 1, 2, 20_000);
        let run = &r.json.as_ref().unwrap()["runs"][0];
        assert!(run["telemetry"].is_null() && run["cc_states"].is_null());
        assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    }
}
