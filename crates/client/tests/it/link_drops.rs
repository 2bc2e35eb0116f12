//! What the link dropped, counted in packets as the senders and receivers see them, beside
//! what the senders declared lost: with offloads on and off, from random loss and from a full
//! bottleneck queue.

use crate::common;

use common::links::fetch_over;
use common::needs::{require, Need};
use common::{assert_complete, qbench};
use serde_json::Value;

fn samples(run: &Value) -> Vec<Value> {
    run["telemetry"][0]["samples"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The summary's or the comparison's line of losses.
fn losses_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.trim_start().starts_with("losses"))
        .unwrap_or_else(|| panic!("no losses line: {stderr}"))
}

/// Packets dropped up and down, and what the server's sender declared lost.
fn drops(r: &common::Run) -> (u64, u64, u64) {
    let run = &r.json.as_ref().unwrap()["runs"][0];
    let d = &run["noise"]["link_drops"];
    let declared: u64 = samples(run)
        .last()
        .map_or(0, |s| s["lost_packets"].as_u64().unwrap());
    (
        d["up"].as_u64().unwrap(),
        d["down"].as_u64().unwrap(),
        declared,
    )
}

/// A comparison across a reordering link shows each side's declared losses beside the link's
/// drops.
#[test]
fn compare_shows_losses_declared_and_dropped() {
    require!(Need::Link);
    let r = qbench(&[
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "1x1MB",
        "--rounds",
        "2",
        "--reorder-threshold",
        "3",
        "--link",
        "rate=100mbit,rtt=20ms,jitter=5ms",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let line = losses_line(&r.stderr);
    assert!(
        line.contains("A: ") && line.contains("dropped by the link"),
        "{line}"
    );
}

/// Each run counts what the link dropped, per direction: nftables' random loss, and a tbf
/// queue too small for slow start. The random loss hits single packets, not GSO super-packets
/// (a link with loss turns offloads off), so each protocol's sender declares as lost about
/// what the link dropped toward the client.
#[test]
fn runs_count_the_links_drops() {
    require!(Need::Link);
    for proto in ["h2", "h3"] {
        let r = fetch_over(proto, "1x2MB", "rate=20mbit,loss=2%", &[]);
        assert_complete(&r, 1, 1, 2_000_000);
        let (up, down, declared) = drops(&r);
        eprintln!("{proto}, loss=2%: dropped {up} up, {down} down; sender declared {declared}");
        // About 1,400-1,700 full packets down, half as many or fewer up.
        assert!(up > 0 && (5..200).contains(&down), "{up} {down}");
        assert!(
            declared.abs_diff(down) <= 3 + down / 5,
            "{proto}: {declared} declared lost, {down} dropped"
        );
    }
    let r = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "1x2MB",
        "--link",
        "rate=10mbit,rtt=20ms,queue=3KB",
    ]);
    assert_complete(&r, 1, 1, 2_000_000);
    let (_, down, _) = drops(&r);
    assert!(down > 0, "a 3 KB queue overflows");
}

/// A full bottleneck queue drops packets, not GSO super-packets, whether the endpoints
/// segment (offloads off) or the link receives super-packets of up to 45 segments (offloads
/// on): TCP's sender declares as many lost as the link dropped, and quinn no more.
#[test]
fn a_full_queue_drops_are_packets_whatever_the_offloads() {
    require!(Need::Link);
    for offloads in ["on", "off"] {
        for proto in ["h2", "h3"] {
            let r = fetch_over(
                proto,
                "1x3MB",
                "rate=20mbit,rtt=20ms,queue=10KB",
                &["--offloads", offloads],
            );
            assert_complete(&r, 1, 1, 3_000_000);
            let (_, down, declared) = drops(&r);
            eprintln!("{proto}, offloads {offloads}: {down} dropped down, {declared} declared");
            assert!(
                down > 0,
                "{proto}, offloads {offloads}: a 10 KB queue overflows"
            );
            // TCP retransmits each dropped segment. quinn declares fewer than were dropped (its
            // last telemetry sample can precede the last detections), but never more: a
            // super-packet counted as one drop would leave most of its datagrams' losses
            // unaccounted for.
            let close = match proto {
                "h2" => declared.abs_diff(down) <= 3 + down / 4,
                _ => declared <= down + 3 && down <= 3 * declared + 10,
            };
            assert!(
                close,
                "{proto}, offloads {offloads}: {declared} declared lost, {down} dropped"
            );
            let losses = losses_line(&r.stderr);
            assert!(
                losses.contains("declared lost") && losses.contains("dropped by the link"),
                "{losses}"
            );
        }
    }
}

/// The host's receive buffer limits, which a run must never change.
fn host_buffer_limits() -> Vec<String> {
    ["rmem_max", "rmem_default", "wmem_max", "wmem_default"]
        .iter()
        .map(|k| std::fs::read_to_string(format!("/proc/sys/net/core/{k}")).unwrap())
        .collect()
}

/// A receive buffer too small for the rate drops datagrams at the client's socket, and the
/// run counts them there, in its own namespace, apart from the link (which dropped nothing);
/// with the default buffer the same link drops none. The sizes granted are read back, and
/// the host's limits are left as they were.
#[test]
fn a_small_receive_buffer_drops_at_the_clients_socket_and_is_counted_there() {
    require!(Need::Link);
    let limits = host_buffer_limits();
    let rmem_max: u64 = limits[0].trim().parse().unwrap();
    let run = |link: &str, extra: &[&str]| {
        let mut args = vec!["--proto", "h3", "--objects", "1x5MB", "--no-calibrate"];
        args.extend(["--link", link]);
        args.extend(extra);
        let r = qbench(&args);
        assert_complete(&r, 1, 1, 5_000_000);
        r.json.unwrap()["runs"][0].clone()
    };
    let small = run(
        "rate=300mbit,rtt=10ms",
        &["--quic", "rcvbuf=16KiB,sndbuf=64KiB"],
    );
    let net = &small["net"];
    assert_eq!(net["scope"], "namespaces", "{net}");
    let client = &net["client"];
    let dropped = client["udp_rcvbuf_errors"].as_u64().unwrap();
    assert!(dropped > 0, "{net}");
    assert!(
        client["udp_in_errors"].as_u64().unwrap() >= dropped,
        "{net}"
    );
    // Asked 16 KiB, granted twice it (root may go below or past the host's limit).
    assert_eq!(net["client_udp_rcvbuf"], 32_768, "{net}");
    assert_eq!(net["server_udp_rcvbuf"], 32_768, "{net}");
    assert_eq!(net["client_udp_sndbuf"], 131_072, "{net}");
    assert_eq!(net["server_udp_sndbuf"], 131_072, "{net}");
    assert_eq!(small["noise"]["link_drops"]["down"], 0, "{small}");

    let quiet = run("rate=50mbit,rtt=10ms", &[]);
    let net = &quiet["net"];
    for side in ["client", "server"] {
        assert_eq!(net[side]["udp_rcvbuf_errors"], 0, "{net}");
        assert_eq!(net[side]["nic_rx_dropped"], 0, "{net}");
        assert_eq!(net[side]["nic_tx_dropped"], 0, "{net}");
        assert!(net[side]["tcp_ext"].is_object(), "{net}");
    }
    assert!(net["client"]["udp_in_datagrams"].as_u64().unwrap() > 5_000_000 / 1500);
    // qbench asks 4 MiB, and the kernel caps an unforced ask at the limit.
    let granted = 2 * rmem_max.min(4 << 20);
    assert_eq!(net["client_udp_rcvbuf"], granted, "{net}");
    assert_eq!(
        host_buffer_limits(),
        limits,
        "a run changed the host's buffer limits"
    );
}
