//! `--server-cpu` (root, as CI runs): the in-process server's threads run in slices, by a CFS
//! quota or the deadline scheduler; each run records what held them, read back from the
//! kernel, and the client's threads are not held.

use crate::common;

use common::{assert_complete, qbench};

/// A loopback h3 download is CPU-bound at the server: under 2% of a core in 100 ms slices,
/// the quota runs out and stops it.
#[test]
fn a_cfs_quota_holds_the_sender_and_counts_the_periods_it_stopped_it() {
    let run = qbench(&[
        "--proto",
        "h3",
        "--objects",
        "1x4MB",
        "--server-cpu",
        "0.02/100ms",
    ]);
    assert_complete(&run, 1, 1, 4_000_000);
    let r = run.json.unwrap();
    assert_eq!(r["config"]["server_cpu"]["sched"], "cfs");
    let s = &r["runs"][0]["server_cpu"];
    assert_eq!(
        (s["quota_us"].as_u64(), s["period_us"].as_u64()),
        (Some(2_000), Some(100_000))
    );
    assert!(s["threads"].as_u64().unwrap() >= 1, "{s}");
    let t = &s["throttling"];
    assert!(t["throttled_periods"].as_u64().unwrap() >= 1, "{s}");
    assert!(t["throttled_us"].as_u64().unwrap() > 0, "{s}");
    assert!(
        r["runs"][0].get("client_cpu").is_none(),
        "the client was not limited"
    );
    assert!(run.stderr.contains("server cpu"), "{}", run.stderr);
}

/// The deadline scheduler splits the share among the workers: 0.04 of a core in 50 ms slices
/// over 2 threads is 1 ms of each period for each.
#[test]
fn the_deadline_scheduler_gives_each_worker_its_part_of_the_share() {
    let run = qbench(&[
        "--proto",
        "h2",
        "--objects",
        "2x1MB",
        "--server-threads",
        "2",
        "--server-cpu",
        "deadline:0.04/50ms",
    ]);
    assert_complete(&run, 1, 2, 2_000_000);
    let r = run.json.unwrap();
    let s = &r["runs"][0]["server_cpu"];
    assert_eq!(s["limit"]["sched"], "deadline", "{s}");
    assert_eq!(
        (s["quota_us"].as_u64(), s["period_us"].as_u64()),
        (Some(1_000), Some(50_000))
    );
    assert_eq!(s["threads"], 2, "{s}");
    assert!(s.get("throttling").is_none(), "{s}");
}

/// Steal: the server's threads are pinned to one CPU, which a real-time thread takes for the
/// rest of each period whatever the server has to do; each run counts the periods taken.
#[test]
fn a_stolen_cpu_pins_the_server_and_counts_what_was_taken() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let run = qbench(&[
        "--proto",
        "h3",
        "--objects",
        "1x40MB",
        "--server-cpu",
        "steal:0.5/20ms",
    ]);
    if cores < 2 {
        assert_eq!(run.code, Some(2), "{}", run.stderr);
        return;
    }
    assert_complete(&run, 1, 1, 40_000_000);
    let r = run.json.unwrap();
    let s = &r["runs"][0]["server_cpu"];
    assert_eq!(s["limit"]["sched"], "steal", "{s}");
    assert_eq!(
        (s["quota_us"].as_u64(), s["period_us"].as_u64()),
        (Some(10_000), Some(20_000))
    );
    assert_eq!(s["threads"], 1, "{s}");
    assert_eq!(s["cpu"].as_u64(), Some(cores as u64 - 1), "{s}");
    let t = &s["throttling"];
    assert!(t["periods"].as_u64().unwrap() >= 1, "{s}");
    assert!(t["throttled_us"].as_u64().unwrap() > 0, "{s}");
    // The stealing thread stops with the server: none is left in this process's threads.
    assert!(
        run.stderr.contains("taken by a real-time thread"),
        "{}",
        run.stderr
    );
}

/// A comparison's two servers share one stealing thread, which takes the CPU only while a
/// side runs: there is never a second one, and each side's runs are held.
#[test]
fn a_comparisons_sides_take_the_stolen_cpu_in_turn() {
    if std::thread::available_parallelism().unwrap().get() < 2 {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args([
            "compare",
            "--protos",
            "h2,h3",
            "--objects",
            "1x200MB",
            "--rounds",
            "2",
        ])
        .args(["--server-cpu", "steal:0.5/20ms", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let task = format!("/proc/{}/task", child.id());
    let (mut most, mut polls) = (0, 0);
    while child.try_wait().unwrap().is_none() && polls < 6000 {
        let stealers = std::fs::read_dir(&task)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| {
                        std::fs::read_to_string(e.path().join("comm"))
                            .is_ok_and(|c| c.trim() == "qbench-steal")
                    })
                    .count()
            })
            .unwrap_or(0);
        most = most.max(stealers);
        polls += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    assert!(child.wait().unwrap().success());
    assert_eq!(most, 1, "stealing threads seen at once");
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for side in ["a", "b"] {
        for run in j[side]["runs"].as_array().unwrap() {
            let s = &run["server_cpu"];
            assert!(
                s["throttling"]["periods"].as_u64().unwrap() >= 1,
                "{side}: {s}"
            );
        }
    }
}
