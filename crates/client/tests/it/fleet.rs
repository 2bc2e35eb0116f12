//! Shards of one workload, started together by `--start-at` and added up by `qbench merge`:
//! the merged report is the whole workload, its histograms the exact sum of the shards'.

use crate::common;

use std::path::{Path, PathBuf};

use common::{qbench_plain, Served};
use qbench_core::LatencyHistogram;
use serde_json::Value;

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs `args` as shards 0..n at once, each writing `dir/shard-I.json`; returns the files.
fn shards(dir: &Path, n: u32, args: &[&str]) -> Vec<PathBuf> {
    let children: Vec<_> = (0..n)
        .map(|i| {
            let json = dir.join(format!("shard-{i}.json"));
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
                .args(args)
                .args(["--shard", &format!("{i}/{n}"), "--json"])
                .arg(&json)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (json, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(json, child)| {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            common::keep_samples(
                &["--json", json.to_str().unwrap()],
                "",
                std::time::UNIX_EPOCH,
            );
            json
        })
        .collect()
}

fn merged(dir: &Path, inputs: &[&Path]) -> (common::Captured, PathBuf) {
    let out = dir.join("merged.json");
    let mut args = vec!["merge", "-o", out.to_str().unwrap()];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    (qbench_plain(&args), out)
}

fn histogram(v: &Value) -> LatencyHistogram {
    LatencyHistogram::decode(v["hdr"].as_str().unwrap()).unwrap()
}

/// Three shards against one server do exactly the unsharded workload (an awkward mix of 34
/// objects over 5 connections), start at one barrier, and merge bit for bit.
#[test]
fn shards_add_up_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let server = Served::start(&[], &cert);
    let go = dir.path().join("go");
    std::fs::write(&go, "").unwrap();
    // Room for three debug processes to start on a loaded machine before the barrier.
    let barrier = format!("+8s@{}", go.display());
    let work = [
        "--proto",
        "h2",
        "--objects",
        "31x2KB,3x20KB",
        "--connections",
        "5",
        "--target",
        &server.target,
        "--ca",
        cert.to_str().unwrap(),
    ];
    let shard_dir = dir.path().join("shards");
    std::fs::create_dir(&shard_dir).unwrap();
    let files = shards(
        &shard_dir,
        3,
        &[&work[..], &["--start-at", &barrier]].concat(),
    );
    let parts: Vec<Value> = files.iter().map(|f| read(f)).collect();
    for (i, p) in parts.iter().enumerate() {
        let s = &p["shard"];
        assert_eq!(
            (s["index"].as_u64(), s["count"].as_u64()),
            (Some(i as u64), Some(3))
        );
        assert_eq!(s["requests"], [12, 11, 11][i]);
        assert_eq!(s["connections"], [2, 2, 1][i]);
        assert_eq!(p["runs"][0]["objects"]["completed"], [12, 11, 11][i]);
        // The config is the whole's; the shard's part is in `shard`.
        assert_eq!(p["config"]["connections"], 5);
        let st = &p["start"];
        assert_eq!(st["late"], false, "{st}");
        assert!(st["skew_us"].as_i64().unwrap() >= 0);
        assert!(st["clock"]["state"].is_string(), "{st}");
    }

    // A directory of shards is read whole.
    let (c, out) = merged(dir.path(), &[&shard_dir]);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    assert!(c.stdout.contains("shard 2/3"), "{}", c.stdout);
    let m = read(&out);
    let whole = qbench_plain(&[&work[..], &["--json", "-"]].concat());
    assert_eq!(whole.code, Some(0), "{}", whole.stderr);
    let whole: Value = serde_json::from_str(&whole.stdout).unwrap();
    let (mr, wr) = (&m["runs"][0], &whole["runs"][0]);
    for field in ["requested", "completed", "failed", "not_started"] {
        assert_eq!(mr["objects"][field], wr["objects"][field], "{field}");
    }
    assert_eq!(mr["payload_bytes"], wr["payload_bytes"]);
    assert_eq!(mr["connections"].as_array().unwrap().len(), 5);
    assert_eq!(m["complete"], true);
    assert!(m["shard"].is_null() && m["merged"]["missing"] == serde_json::json!([]));
    // The merged histogram is the shards' added here, quantile for quantile.
    let mut sum = LatencyHistogram::new();
    for p in &parts {
        sum.merge(&histogram(&p["runs"][0]["object_latency"]))
            .unwrap();
    }
    let got = histogram(&mr["object_latency"]);
    assert_eq!(got.summary(), sum.summary());
    for q in 0..=100 {
        let q = f64::from(q) / 100.0;
        assert_eq!(got.quantile_us(q), sum.quantile_us(q));
    }
    let entries = m["merged"]["shards"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    assert!(entries
        .iter()
        .all(|e| e["start"]["barrier_unix_us"] == entries[0]["start"]["barrier_unix_us"]));
    assert!(server.stop());
}

/// An open loop split three ways sends exactly the whole schedule: each shard a third of
/// the rate, starting at its place in the whole's spacing.
#[test]
fn sharded_open_loop_sends_the_whole_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(
        dir.path(),
        3,
        &[
            "--proto",
            "h2",
            "--objects",
            "1x1KB",
            "--connections",
            "3",
            "--duration",
            "1s",
            "--rate",
            "300",
        ],
    );
    for (i, f) in files.iter().enumerate() {
        let s = &read(f)["shard"];
        assert_eq!(s["rate"], 100.0);
        assert_eq!(s["phase_us"], [0, 3333, 6666][i]);
        assert_eq!(s["max_inflight"], [3334, 3333, 3333][i]);
    }
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (c, out) = merged(dir.path(), &refs);
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    let load = &read(&out)["runs"][0]["load"];
    assert_eq!(load["target_rate"], 300.0);
    let sent = load["sent"].as_u64().unwrap() + load["dropped"].as_u64().unwrap();
    assert_eq!(sent, 300, "{load}");
}

#[test]
fn missing_failed_and_foreign_shards_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let work = ["--proto", "h2", "--objects", "6x1KB", "--connections", "3"];
    let files = shards(dir.path(), 3, &work);
    // One shard missing: merged, named, incomplete, exit 1.
    let (c, out) = merged(dir.path(), &[&files[0], &files[2]]);
    assert_eq!(c.code, Some(1), "{}", c.stderr);
    assert!(c.stderr.contains("shard(s) 1 missing"), "{}", c.stderr);
    let m = read(&out);
    assert_eq!(m["complete"], false);
    assert_eq!(m["merged"]["missing"], serde_json::json!([1]));

    // A truncated file, a different workload, the same shard twice, another schema version:
    // refused, named.
    let cut = dir.path().join("cut.json");
    let text = std::fs::read(&files[1]).unwrap();
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let old = dir.path().join("old.json");
    let mut v = read(&files[1]);
    v["schema_version"] = 1.into();
    std::fs::write(&old, serde_json::to_vec(&v).unwrap()).unwrap();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let foreign = shards(
        &other,
        3,
        &["--proto", "h3", "--objects", "6x1KB", "--connections", "3"],
    );
    for (inputs, want) in [
        (
            vec![files[0].as_path(), cut.as_path()],
            "cut.json: not JSON",
        ),
        (
            vec![files[0].as_path(), foreign[1].as_path()],
            "`proto` differs",
        ),
        (vec![files[0].as_path(), files[0].as_path()], "both shard 0"),
        (
            vec![files[0].as_path(), old.as_path()],
            "old.json: run report version 1",
        ),
    ] {
        let (c, _) = merged(dir.path(), &inputs);
        assert_eq!(c.code, Some(2), "{}", c.stderr);
        let line = c.stderr.lines().next().unwrap_or_default();
        assert!(
            line.starts_with("error: REPORT: ") && line.contains(want),
            "{line}"
        );
    }
}

#[test]
fn bad_shards_and_barriers_are_refused() {
    for (args, want) in [
        (&["--shard", "3/2"][..], "--shard"),
        (&["--shard", "0/0"][..], "--shard"),
        (&["--shard", "auto/4"][..], "none of SLURM_ARRAY_TASK_ID"),
        (
            &["--shard", "2/4", "--connections", "2", "--objects", "4x1KB"][..],
            "4 shards need at least 4 --connections",
        ),
        (&["--start-at", "soon"][..], "--start-at"),
        (
            &["--start-at", "+1s@/nonexistent/qbench-go"][..],
            "/nonexistent/qbench-go",
        ),
        (
            &["compare", "--protos", "h2,h3", "--shard", "0/2"][..],
            "--shard",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
            .args(args)
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("PMIX_RANK")
            .env_remove("OMPI_COMM_WORLD_RANK")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        // clap's own value errors add a "try --help" line after the one that names the flag.
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(want), "{args:?}: {err}");
    }
}

/// `auto` takes the index from the launcher's variable and says which.
#[test]
fn auto_shard_names_its_source() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args([
            "--proto",
            "h2",
            "--objects",
            "4x1KB",
            "--connections",
            "2",
            "--shard",
            "auto/2",
            "--json",
            "-",
        ])
        .env("JOB_COMPLETION_INDEX", "1")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["shard"]["index"], 1);
    assert_eq!(r["shard"]["source"], "JOB_COMPLETION_INDEX");
    assert_eq!(r["runs"][0]["objects"]["completed"], 2);
}
