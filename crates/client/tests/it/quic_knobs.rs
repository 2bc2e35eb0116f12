//! `--quic`: each setting is recorded in the report and reaches both ends' quinn, as the
//! stacks' own counters show (the client's per connection, the server's in its telemetry).

use crate::common;

use common::needs::{require, Need};
use serde_json::Value;

/// One 3 MB object over h3 on loopback with `knobs`: the report's config, the client's
/// counters and the server's.
fn run(knobs: &str) -> (Value, Value, Value) {
    let mut args = vec!["--objects", "1x3MB", "--verify"];
    if !knobs.is_empty() {
        args.extend(["--quic", knobs]);
    }
    let r = common::qbench(&args);
    common::assert_complete(&r, 1, 1, 3_000_000);
    let j = r.json.unwrap();
    let run = &j["runs"][0];
    let client = run["connections"][0]["quic"].clone();
    let tl = run["telemetry"].as_array().expect("server telemetry");
    assert_eq!(tl.len(), 1);
    (j["config"]["quic"].clone(), client, tl[0]["quic"].clone())
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
fn stock_settings_record_nothing_and_batch_both_ways() {
    let (config, c, s) = run("");
    assert!(config.is_null(), "{config}");
    // 3 MB in at most 1452-byte datagrams.
    assert!(n(&c, "rx_datagrams") >= 3_000_000 / 1452, "{c}");
    assert!(n(&s, "tx_datagrams") >= 3_000_000 / 1452, "{s}");
    // GSO: the server sends several datagrams per system call on loopback.
    assert!(n(&s, "tx_calls") < n(&s, "tx_datagrams"), "{s}");
    assert_eq!(
        (c["gro"].as_bool(), s["gro"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(
        n(&c, "ack_frequency_received") + n(&s, "ack_frequency_received"),
        0
    );
    // MTU discovery on loopback climbs from 1200 towards quinn's default upper bound.
    assert_discovered(&c, &s, 1200, 1452);
}

/// Both ends' path MTU climbed above `from` and stayed within `bound`. It need not reach
/// `bound`: loopback drops datagrams when a receive buffer fills mid-transfer, and quinn ends
/// its binary search below the bound when one probe is lost three times (CI saw 3956 of 4000).
fn assert_discovered(c: &Value, s: &Value, from: u64, bound: u64) {
    for (side, v) in [("client", c), ("server", s)] {
        let mtu = n(v, "mtu");
        assert!(
            from < mtu && mtu <= bound,
            "{side} mtu {mtu} not in ({from}, {bound}]"
        );
    }
}

#[test]
fn gso_off_sends_one_datagram_per_call() {
    let (config, _, s) = run("gso=off");
    assert_eq!(config, serde_json::json!({"gso": false}));
    assert_eq!(n(&s, "tx_calls"), n(&s, "tx_datagrams"), "{s}");
}

#[test]
fn gro_off_reaches_both_sockets() {
    let (config, c, s) = run("gro=off");
    assert_eq!(config, serde_json::json!({"gro": false}));
    assert_eq!(
        (c["gro"].as_bool(), s["gro"].as_bool()),
        (Some(false), Some(false))
    );
}

#[test]
fn ack_frequency_is_asked_of_each_peer() {
    let (config, c, s) = run("ack-frequency=1");
    assert_eq!(config, serde_json::json!({"ack_frequency": 1}));
    for side in [&c, &s] {
        assert!(n(side, "ack_frequency_sent") >= 1, "{side}");
        assert!(n(side, "ack_frequency_received") >= 1, "{side}");
    }
    // How many ACKs follow is not asserted: quinn sends them once per batch of datagrams
    // it reads, however low the threshold, so the count depends on timing.
    let (config, c, s) = run("ack-frequency=1000,ack-delay=1ms");
    assert_eq!(
        config,
        serde_json::json!({"ack_frequency": 1000, "ack_delay_us": 1000})
    );
    assert!(n(&c, "ack_frequency_received") >= 1 && n(&s, "ack_frequency_received") >= 1);
}

#[test]
fn mtu_settings_decide_the_path_mtu() {
    let (config, c, s) = run("mtu-discovery=off");
    assert_eq!(config, serde_json::json!({"mtu_discovery": false}));
    assert_eq!((n(&c, "mtu"), n(&s, "mtu")), (1200, 1200));
    let (_, c, s) = run("mtu-discovery=off,initial-mtu=1400");
    assert_eq!((n(&c, "mtu"), n(&s, "mtu")), (1400, 1400));
    // Loopback carries 64 KB: discovery climbs past the default bound towards the raised one
    // on both ends. (At 9000, quinn 0.11's server falls back to 1200 unless gso=off.)
    let (config, c, s) = run("max-udp-payload=4000");
    assert_eq!(config, serde_json::json!({"max_udp_payload": 4000}));
    assert_discovered(&c, &s, 1452, 4000);
    assert!(n(&c, "rx_datagrams") < 3_000_000 / 1452, "{c}");
}

#[test]
fn the_rest_is_recorded_and_runs() {
    let (config, _, _) = run("initial-rtt=20ms,send-window=4MB");
    assert_eq!(
        config,
        serde_json::json!({"initial_rtt_us": 20_000, "send_window": 4_000_000})
    );
}

/// A compare of h2 and h3 sets the QUIC side alone, and says so in its label.
#[test]
fn compare_sets_the_quic_side_only() {
    let r = common::qbench(&[
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "1x1MB",
        "--rounds",
        "2",
        "--quic",
        "gso=off",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json.unwrap();
    assert_eq!(
        (j["label_a"].as_str(), j["label_b"].as_str()),
        (Some("h2"), Some("h3 quic=gso=off"))
    );
    assert!(j["a"]["config"]["quic"].is_null());
    assert_eq!(j["b"]["config"]["quic"], serde_json::json!({"gso": false}));
}

#[test]
fn bad_settings_are_refused_naming_the_flag() {
    for args in [
        &["--quic", "pacing=off"][..],
        &["--quic", "ack-frequency=0"][..],
        &["--quic", "ack-delay=5ms"][..],
        &["--quic", "max-udp-payload=70000"][..],
        &["--proto", "h2", "--quic", "gso=off"][..],
    ] {
        let out = common::qbench_plain(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error:") && first.contains("--quic"),
            "{args:?}: {first}"
        );
    }
}

/// `compete` sets the QUIC flows alone: a TCP flow beside them runs with its stack's own.
#[test]
fn compete_sets_the_quic_flows_only() {
    require!(Need::Link);
    let r = common::qbench(&[
        "compete",
        "--flows",
        "h3:1,h2:1",
        "--objects",
        "1x500KB",
        "--link",
        "rate=50mbit,rtt=10ms",
        "--quic",
        "gso=off",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json.unwrap();
    let flows = j["flows"].as_array().unwrap();
    let config = |proto: &str| {
        let f = flows
            .iter()
            .find(|f| f["report"]["config"]["proto"] == proto)
            .unwrap_or_else(|| panic!("a {proto} flow"));
        f["report"]["config"]["quic"].clone()
    };
    assert_eq!(config("h3"), serde_json::json!({"gso": false}));
    assert!(config("h2").is_null());
}
