//! `qbench cost` against a criterion output tree written here with known medians, and against
//! real run reports.

use std::path::Path;

use serde_json::{json, Value};

use crate::common;

const IDS: [&str; 19] = [
    "quic_packet/produce/aes256gcm-1452-gso",
    "quic_packet/ack/aes256gcm-1452-gso",
    "quic_packet/consume/aes256gcm-1452-gso",
    "socket_pipe/udp/gso",
    "socket_pipe/tcp/65536",
    "socket_io/tcp_write/65536",
    "socket_io/tcp_read/65536",
    "tls_record/seal/aes256gcm-16384",
    "tls_record/open/aes256gcm-16384",
    "http_framing/h3_data/262144",
    "http_framing/h2_data/262144",
    "sys_cost/wakeup/tokio",
    "sys_cost/page_fault/anon-4k",
    "socket_io/udp_send/sendmsg",
    "socket_io/udp_recv/recvmmsg",
    "socket_io/tcp_write/16384",
    "socket_io/tcp_read/16384",
    "quic_runtime/transfer/aes256gcm-1452",
    "quic_runtime/link/1452",
];

/// The two files criterion writes per benchmark, with `ns` as every estimate.
fn fake_criterion(root: &Path, ns: f64) {
    for id in IDS {
        let dir = root.join(id).join("new");
        std::fs::create_dir_all(&dir).unwrap();
        let bench = json!({"full_id": id, "directory_name": id, "throughput": {"Bytes": 1}});
        std::fs::write(dir.join("benchmark.json"), bench.to_string()).unwrap();
        let est = |v: f64| json!({"point_estimate": v, "standard_error": 1.0});
        let estimates = json!({"mean": est(ns * 2.0), "median": est(ns), "slope": null});
        std::fs::write(dir.join("estimates.json"), estimates.to_string()).unwrap();
    }
}

fn cost(args: &[&str]) -> (Option<i32>, String, String) {
    let c = common::qbench_plain(&[&["cost"], args].concat());
    (c.code, c.stdout, c.stderr)
}

#[test]
fn predicts_from_medians_and_holds_real_reports_against_the_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let crit = dir.path().join("criterion");
    fake_criterion(&crit, 1000.0);
    let mut reports = Vec::new();
    for proto in ["h2", "h3"] {
        let run = common::qbench(&["--proto", proto, "--objects", "1x20MB", "--runs", "2"]);
        common::assert_complete(&run, 2, 1, 20_000_000);
        let json = run.json.as_ref().unwrap();
        for r in json["runs"].as_array().unwrap() {
            let cpu = &r["cpu"];
            for side in ["client", "server"] {
                assert!(cpu[side]["minor_faults"].is_u64(), "{cpu}");
                assert!(cpu[side]["voluntary_switches"].is_u64(), "{cpu}");
            }
            if proto == "h3" {
                assert!(cpu["client_tcp"].is_null() && cpu["server_tcp"].is_null());
                continue;
            }
            // Every payload byte came through the client's reads, which the server wrote:
            // TLS and HTTP/2 framing on top, a few percent at most.
            let (c, s) = (&cpu["client_tcp"], &cpu["server_tcp"]);
            let read = c["read_bytes"].as_u64().unwrap();
            assert!((20_000_000..20_400_000).contains(&read), "{c}");
            assert!(s["written_bytes"].as_u64().unwrap() >= 20_000_000, "{s}");
            // rustls reads about one record at a time: never 64 KiB at once, never nothing.
            let reads = c["reads"].as_u64().unwrap();
            assert!(reads >= read / 65_536 && reads <= read, "{c}");
        }
        let path = dir.path().join(format!("{proto}.json"));
        std::fs::write(&path, run.json.unwrap().to_string()).unwrap();
        reports.push(path);
    }
    let out = dir.path().join("cost.json");
    let (code, stdout, stderr) = cost(&[
        "--criterion",
        crit.to_str().unwrap(),
        reports[0].to_str().unwrap(),
        reports[1].to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("| QUIC (h3) | sender | build + seal packet | 1000 |"));
    assert!(stdout.contains("Measured QUIC / TCP+TLS CPU per GB"));

    let v: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    // 1 us per unit: four per-packet rows at 1452 - 41 payload bytes a packet (quinn's async
    // layer, the runtime bench less the link's and three of them, is zero here), and one per
    // 256 KiB frame.
    let quic = 4.0 * 1e9 / 1411.0 * 1e-6 + 1e9 / 262144.0 * 1e-6;
    let predicted = v["model"]["predicted_quic_cpu_s_per_gb"].as_f64().unwrap();
    assert!((predicted - quic).abs() < 1e-6, "{predicted} vs {quic}");
    let measured = v["measured"].as_array().unwrap();
    assert_eq!(measured.len(), 2);
    for (m, stack) in measured.iter().zip(["tcp_tls", "quic"]) {
        assert_eq!(m["stack"], stack);
        assert_eq!(m["runs"], 2);
        let cpu = m["cpu_s_per_gb"].as_f64().unwrap();
        assert!(cpu > 0.0);
        let ratio = m["ratio"].as_f64().unwrap();
        let pred = m["predicted_cpu_s_per_gb"].as_f64().unwrap();
        let with = m["predicted_with_events_cpu_s_per_gb"].as_f64().unwrap();
        assert!((ratio - cpu / with).abs() < 1e-9);
        // Each counted event at 1 us (an ACK datagram: two benches, 2 us), so its CPU per GB
        // is its count per GB over a million (or half a million).
        let mut added = 0.0;
        let mut kinds = Vec::new();
        for e in m["events"].as_array().unwrap() {
            let (per_gb, s) = (
                e["per_gb"].as_f64().unwrap(),
                e["cpu_s_per_gb"].as_f64().unwrap(),
            );
            let us = if e["event"] == "ack_datagram" {
                2.0
            } else {
                1.0
            };
            assert!((s - per_gb * us * 1e-6).abs() < 1e-9, "{e}");
            added += s;
            kinds.push(e["event"].as_str().unwrap().to_string());
        }
        assert!((with - pred - added).abs() < 1e-9);
        let want: &[&str] = match stack {
            "quic" => &["wakeup", "page_fault", "ack_datagram"],
            _ => &["wakeup", "page_fault", "tcp_read_call", "tcp_write_call"],
        };
        assert_eq!(kinds, want);
        // A download's QUIC client sends its ACKs: some datagrams per GB, far fewer than the
        // ~700,000 packets a GB takes.
        if stack == "quic" {
            let acks = m["events"][2]["per_gb"].as_f64().unwrap();
            assert!(acks > 0.0 && acks < 700_000.0, "{acks}");
        }
    }
    assert_eq!(v["model"]["events"].as_array().unwrap().len(), 5);
    assert!(stdout.contains("| cross-thread wakeups | 1000 | sys_cost/wakeup/tokio |"));
}

#[test]
fn bad_input_is_named_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let crit = dir.path().join("criterion");
    let crit_s = crit.to_str().unwrap();
    let (code, _, err) = cost(&["--criterion", crit_s]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--criterion") && err.contains("cargo bench -p qbench-benches"));
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    fake_criterion(&crit, 10.0);
    // A suite or packet size the benches do not measure is bad input: status 2, refused by
    // the parser before any result is read.
    let (code, _, err) = cost(&["--criterion", crit_s, "--suite", "aes"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("'aes'") && err.contains("--suite"), "{err}");
    let (code, _, err) = cost(&["--criterion", crit_s, "--mtu", "1500"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("'1500'") && err.contains("--mtu"), "{err}");
    let (code, _, err) = cost(&["--criterion", crit_s, "--suite", "chacha20"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("quic_packet/produce/chacha20-1452-gso"),
        "{err}"
    );

    let h1 = dir.path().join("h1.json");
    let run = common::qbench_plain(&[
        "--proto",
        "h1",
        "--objects",
        "1x1KB",
        "--json",
        h1.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (code, _, err) = cost(&["--criterion", crit_s, h1.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("config.proto is h1"), "{err}");
}

#[test]
fn reports_of_other_schemas_versions_or_no_bytes_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let crit = dir.path().join("criterion");
    fake_criterion(&crit, 10.0);
    // Two links back up the tree: following them, the walk would never end.
    std::os::unix::fs::symlink(&crit, crit.join("quic_packet/loop")).unwrap();
    std::os::unix::fs::symlink(&crit, crit.join("socket_io/loop")).unwrap();
    let crit_s = crit.to_str().unwrap();
    let empty = dir.path().join("empty.json");
    let run = common::qbench_plain(&[
        "--proto",
        "h2",
        "--objects",
        "2x0B",
        "--json",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let report: Value = serde_json::from_slice(&std::fs::read(&empty).unwrap()).unwrap();
    for (name, change, needle) in [
        ("other.json", ("schema", json!("other")), "schema `other`"),
        ("v99.json", ("schema_version", json!(99)), "version 99"),
    ] {
        let mut r = report.clone();
        r[change.0] = change.1;
        let path = dir.path().join(name);
        std::fs::write(&path, r.to_string()).unwrap();
        let c = common::qbench_within(&["cost", "--criterion", crit_s, path.to_str().unwrap()], 60);
        // Bad input: a usage error naming the file.
        assert_eq!(c.code, Some(2), "{}", c.stderr);
        assert!(
            c.stderr.contains(name) && c.stderr.contains(needle),
            "{}",
            c.stderr
        );
    }
    let c = common::qbench_within(
        &["cost", "--criterion", crit_s, empty.to_str().unwrap()],
        60,
    );
    assert_eq!(c.code, Some(1), "{}", c.stdout);
    assert!(
        c.stderr.contains("no complete run moved a payload byte"),
        "{}",
        c.stderr
    );
    assert!(!c.stdout.contains("NaN") && !c.stderr.contains("NaN"));
    let c = common::qbench_within(&["cost", "--criterion", crit_s, "--json", "-"], 60);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    let only_json: Value = serde_json::from_str(&c.stdout).expect("stdout is JSON alone");
    assert!(!only_json.to_string().contains("NaN"));
}

/// `--json` naming one of the reports held against the prediction is refused before the
/// report is read, and the report is left as it was.
#[test]
fn the_table_is_not_written_over_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let crit = dir.path().join("criterion");
    fake_criterion(&crit, 10.0);
    let r = dir.path().join("r.json");
    let r_s = r.to_str().unwrap();
    let run = common::qbench_plain(&["--proto", "h2", "--objects", "1x1MB", "--json", r_s]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let before = std::fs::read(&r).unwrap();
    let (code, _, err) = cost(&["--criterion", crit.to_str().unwrap(), r_s, "--json", r_s]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("error: --json: ") && err.contains("REPORT"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        std::fs::read(&r).unwrap() == before,
        "the report was replaced"
    );
}
