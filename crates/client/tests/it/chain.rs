//! Two emulated segments joined by a middle host (root, as CI runs): `--proxy` fetches through
//! `qbench proxy` there, byte for byte; without it the client goes straight across both
//! segments; and nothing is left behind.

use crate::common;

use common::links::ours;
use common::needs::{require, Need};
use common::{assert_complete, qbench};
use serde_json::Value;

fn through(proto: &str, proxy: Option<&str>) -> Value {
    let mut args = vec![
        "--proto",
        proto,
        "--link-a",
        "rtt=10ms",
        "--link-b",
        "rtt=10ms",
        "--objects",
        "3x1MB,10x10KB",
        "--verify",
    ];
    if let Some(p) = proxy {
        args.extend(["--proxy", p]);
    }
    let r = qbench(&args);
    assert_complete(&r, 1, 13, 3_100_000);
    r.json.unwrap()
}

#[test]
fn proxied_and_direct_across_the_middle_host() {
    require!(Need::Link);
    let before = ours();
    for (proto, via) in [("h2", "h2"), ("h3", "h3"), ("h1", "h3"), ("h3", "h2")] {
        let j = through(proto, Some(via));
        let run = &j["runs"][0];
        let p = &run["proxy"];
        assert_eq!(p["upstream"], via, "{p}");
        assert_eq!(p["requests"], 13, "{p}");
        assert_eq!(p["bytes_down"], 3_100_000, "{p}");
        assert_eq!(p["connect_failures"], 0, "{p}");
        assert!(p["cpu"]["user_s"].as_f64().is_some());
        assert_eq!(j["config"]["proxy"], via);
        assert_eq!(j["link_b"]["namespaces"]["net"], 3);
        assert_eq!(j["link_b"]["namespaces"]["shares_client"], true);
        assert_eq!(
            j["link_b"]["namespaces"]["client"],
            j["link"]["namespaces"]["server"]
        );
    }
    let direct = through("h3", None);
    assert!(direct["runs"][0]["proxy"].is_null());
    // Straight across both segments: a QUIC handshake takes at least their two RTTs.
    let hs = direct["runs"][0]["handshake_us"].as_u64().unwrap();
    assert!(hs >= 20_000, "direct handshake {hs} us across 2 x 10 ms");
    assert_eq!(ours(), before, "namespaces left behind");
}

#[test]
fn compare_sides_may_differ_in_proxy() {
    require!(Need::Link);
    let before = ours();
    let r = common::qbench_plain(&[
        "compare",
        "--protos",
        "h2,h3",
        "--link-a",
        "rtt=10ms",
        "--link-b",
        "rtt=10ms",
        "--a.proxy",
        "h2",
        "--objects",
        "2x100KB",
        "--rounds",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(j["label_a"], "h2 proxy=h2");
    for run in j["a"]["runs"].as_array().unwrap() {
        assert_eq!(run["proxy"]["bytes_down"], 200_000);
    }
    for run in j["b"]["runs"].as_array().unwrap() {
        assert!(run["proxy"].is_null());
        assert_eq!(run["payload_bytes"], 200_000);
    }
    // Only the run's own namespaces, as its report names them: a test beside it may hold
    // links of its own.
    let mut made = Vec::new();
    namespaces_in(&j, &mut made);
    assert!(!made.is_empty(), "the report names no namespaces");
    let left: Vec<String> = ours()
        .into_iter()
        .filter(|n| made.contains(n) && !before.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

/// Every namespace a report's links name.
fn namespaces_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(names)) = m.get("namespaces") {
                for key in ["client", "router", "server"] {
                    if let Some(Value::String(n)) = names.get(key) {
                        out.push(n.clone());
                    }
                }
            }
            m.values().for_each(|x| namespaces_in(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| namespaces_in(x, out)),
        _ => {}
    }
}

#[test]
fn dry_run_shows_both_segments_and_the_routes_that_join_them() {
    let r = common::qbench_plain(&[
        "--link-a",
        "rate=10mbit,loss=1%",
        "--link-b",
        "rtt=20ms",
        "--proxy",
        "h3",
        "--dry-run",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let s = &r.stdout;
    for want in [
        "ip netns add qb-ID-c",
        "198.18.2.2/24",
        "198.18.3.2/24",
        "198.18.4.2/24",
        "ip -n qb-ID-r route add 198.18.4.0/24 via 198.18.2.2",
        "ip -n qb-ID2-r route add 198.18.1.0/24 via 198.18.3.2",
        "ip netns exec qb-ID-s sysctl -qw net.ipv4.ip_forward=1",
    ] {
        assert!(s.contains(want), "missing `{want}` in:\n{s}");
    }
    // The middle host is made once, by the client's segment.
    assert!(!s.contains("ip netns add qb-ID-s\nip netns add qb-ID-s"));
    assert!(!s.contains("ip netns add qb-ID2-c"), "{s}");
}

#[test]
fn bad_chains() {
    for (args, flag) in [
        // clap names the flags --proxy needs.
        (&["--proxy", "h2"][..], "--link"),
        (&["--link-b", "rtt=10ms"][..], "--link <SPEC>"),
        (
            &[
                "--link-a", "rtt=1ms", "--link-b", "rtt=1ms", "--proxy", "h1",
            ][..],
            "--proxy",
        ),
        (
            &[
                "--link-a", "rtt=1ms", "--link-b", "rtt=1ms", "--proxy", "quic",
            ][..],
            "--proxy",
        ),
        (
            &[
                "--target",
                "https://127.0.0.1:9",
                "--link-a",
                "rtt=1ms",
                "--link-b",
                "rtt=1ms",
                "--proxy",
                "h2",
            ][..],
            "--link",
        ),
        (&["compare", "--a.proxy", "h2"][..], "--proxy"),
        (&["compare", "--b.proxy", "h4"][..], "--b.proxy"),
        (
            &[
                "--proto",
                "h2",
                "--link-a",
                "rtt=1ms",
                "--link-b",
                "rtt=1ms",
                "--cwnd-cap",
                "10",
            ][..],
            "--cwnd-cap",
        ),
    ] {
        common::refused(args, flag);
    }
}
