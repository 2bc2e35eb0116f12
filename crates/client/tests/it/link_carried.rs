//! Every run over `--link` is checked against the link's spec after it ends, by the link's
//! own counters: what left each direction against what its rate allows, and the delay line's
//! lateness. A run whose delay line was starved of CPU (the whole qbench process under a 10%
//! CPU quota) is flagged as one the link could not carry, in the report and the summary.

use std::os::unix::process::CommandExt as _;

use crate::common;

use common::needs::{require, Need};
use qbench_shaper::cgroup::{probe, CpuCgroup};
use serde_json::Value;

/// One direction's figures: bytes out of the egress, what the rate allowed.
fn dir(check: &Value, d: &str) -> (u64, u64) {
    let d = &check[d];
    (
        d["bytes"].as_u64().unwrap(),
        d["allowed_bytes"].as_u64().unwrap(),
    )
}

fn kinds(check: &Value) -> Vec<String> {
    check["shortfalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_run_is_checked_against_its_rate_by_the_links_counters() {
    require!(Need::Link);
    let r = common::qbench(&[
        "--proto",
        "h2",
        "--objects",
        "1x2MB",
        "--no-calibrate",
        "--link",
        "rate=20mbit,rtt=20ms,up.rate=10mbit",
    ]);
    common::assert_complete(&r, 1, 1, 2_000_000);
    let run = &r.json.as_ref().unwrap()["runs"][0];
    let check = &run["link_check"];
    let secs = check["seconds"].as_f64().unwrap();
    let (down, allowed) = dir(check, "down");
    // The rate's allowance is the run's time at 20 Mbit/s, plus one bucket (a few packets).
    let expected = 20e6 / 8.0 * secs;
    assert!(
        (allowed as f64) >= expected && (allowed as f64) < expected + 64_000.0,
        "allowed {allowed} over {secs} s"
    );
    // Every payload byte crossed the egress toward the client, with headers and no more than
    // the rate allows.
    assert!(down > 2_000_000 && down <= allowed, "{check}");
    let (up, up_allowed) = dir(check, "up");
    assert!(up > 0 && up < down / 10, "{check}");
    assert!(up_allowed < allowed, "{check}");
    // The delay line counted what it carried, the same packets tc counted.
    let delayed = check["down"]["delayed_packets"].as_u64().unwrap();
    let packets = check["down"]["packets"].as_u64().unwrap();
    assert!(delayed >= packets, "{check}");
    let kinds = kinds(check);
    assert!(
        !kinds.iter().any(|k| k == "over_rate" || k == "tun_dropped"),
        "{check}"
    );
    // The kernel's counters are each namespace's own: the server sent the body's segments
    // (2 MB at an MSS of at most 1448 bytes) and the client its acknowledgements, and no UDP
    // moved in either, whatever other tests sent on this host meanwhile.
    let net = &run["net"];
    assert_eq!(net["scope"], "namespaces", "{net}");
    let (client, server) = (&net["client"], &net["server"]);
    assert!(
        server["tcp_out_segs"].as_u64().unwrap() >= 2_000_000 / 1448,
        "{net}"
    );
    assert!(client["tcp_out_segs"].as_u64().unwrap() > 0, "{net}");
    for side in [client, server] {
        for k in ["udp_in_datagrams", "udp_out_datagrams", "udp_rcvbuf_errors"] {
            assert_eq!(side[k], 0, "{k}: {net}");
        }
        // Where TCP lost and what the veths dropped are read in each namespace too; nothing
        // in a run the link carried whole overflows an interface.
        assert!(side["tcp_ext"]["tcp_timeouts"].is_u64(), "{net}");
        assert!(side["tcp_ext"]["tcp_backlog_drop"].is_u64(), "{net}");
        assert_eq!(side["nic_rx_dropped"], 0, "{net}");
        assert_eq!(side["nic_tx_dropped"], 0, "{net}");
    }
    assert!(
        r.stderr
            .contains("  sockets        full buffers dropped 0 datagrams"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_run_whose_delay_line_starved_is_flagged_as_the_links() {
    require!(Need::Root, Need::Link, Need::CgroupCpu);
    let cg = CpuCgroup::create(&probe().unwrap()).unwrap();
    cg.set_limit(Some(0.1)).unwrap();
    let threads = cg.threads_path();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("qbench"));
    cmd.args([
        "--proto",
        "h2",
        "--objects",
        "1x2MB",
        "--no-calibrate",
        "--link",
        "rate=100mbit,rtt=20ms",
        "--json",
        "-",
    ]);
    // SAFETY: between fork and exec only write(2)s to a path prepared before the fork; every
    // thread qbench starts inherits the quota.
    unsafe {
        cmd.pre_exec(move || std::fs::write(&threads, std::process::id().to_string()));
    }
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(std::time::Duration::from_secs(240))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = &j["runs"][0]["link_check"];
    let kinds = kinds(check);
    assert!(
        kinds.iter().any(|k| k == "late" || k == "starved"),
        "{check}"
    );
    assert!(
        stderr.contains("the link could not carry run 0: its delay line"),
        "{stderr}"
    );
}
