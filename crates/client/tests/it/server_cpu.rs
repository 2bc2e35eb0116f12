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
        "2x1MB",
        "--server-cpu",
        "steal:0.5/20ms",
    ]);
    if cores < 2 {
        assert_eq!(run.code, Some(2), "{}", run.stderr);
        return;
    }
    assert_complete(&run, 1, 2, 2_000_000);
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
