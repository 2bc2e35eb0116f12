//! `scripts/tools/fleet_ssh.sh` end to end on a small cluster of network namespaces, each host
//! running its own sshd (`scripts/ci/fleet_ssh_check.sh` builds and removes it): the merged
//! report is the whole workload, its histograms the exact sum of the shards' files, and
//! nothing is left behind.

use crate::common;

use std::path::Path;

use common::needs::{require, Need};
use qbench_core::LatencyHistogram;
use serde_json::Value;

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn namespaces() -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn fleet_over_ssh_merges_the_whole_workload() {
    require!(
        Need::Root,
        Need::Tool("ip"),
        Need::Tool("sshd"),
        Need::Tool("ssh"),
        Need::Tool("ssh-keygen")
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ci/fleet_ssh_check.sh");
    let run = std::process::Command::new("timeout")
        .arg("180")
        .arg("bash")
        .arg(&script)
        .arg(&out)
        .env("QBENCH", env!("CARGO_BIN_EXE_qbench"))
        .output()
        .unwrap();
    let log =
        String::from_utf8_lossy(&run.stderr).into_owned() + &String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{log}");

    let merged = read(&out.join("merged.json"));
    assert_eq!(merged["complete"], true, "{log}");
    let m = &merged["runs"][0];
    // The check's default workload: 60 objects of 10 KB over 6 h3 connections.
    assert_eq!(m["objects"]["completed"], 60);
    assert_eq!(m["payload_bytes"], 600_000);
    assert_eq!(m["connections"].as_array().unwrap().len(), 6);
    let shards = merged["merged"]["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    let mut sum = LatencyHistogram::new();
    let mut barrier = None;
    for i in 0..3 {
        let s = read(&out.join(format!("shard-{i}.json")));
        assert_eq!(s["shard"]["requests"], 20);
        assert_eq!(s["config"]["target"]["origin"]["host"], "198.18.0.2");
        let b = s["start"]["barrier_unix_us"].as_u64().unwrap();
        assert_eq!(*barrier.get_or_insert(b), b, "one barrier for all");
        let h = s["runs"][0]["object_latency"]["hdr"].as_str().unwrap();
        sum.merge(&LatencyHistogram::decode(h).unwrap()).unwrap();
    }
    let got = LatencyHistogram::decode(m["object_latency"]["hdr"].as_str().unwrap()).unwrap();
    assert_eq!(got.summary(), sum.summary());

    assert!(!namespaces().contains("qbf"), "{}", namespaces());
    let sshd = std::process::Command::new("pgrep")
        .args(["-f", "qbench-fleet-check"])
        .output()
        .unwrap();
    assert!(
        sshd.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&sshd.stdout)
    );
}
