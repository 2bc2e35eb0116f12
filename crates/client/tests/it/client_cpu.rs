//! `--client-cpu` and `--client-cpuset` (root, as CI runs): the quota is the one asked for, as
//! read back from the cgroup's own files while the client runs; it holds the client's threads
//! and not the in-process server's; and it is gone after the run, after SIGINT, and after a
//! `kill -9` once `qbench-shaper cleanup` ran.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::needs::{require, Need};
use common::{assert_complete, qbench};
use qbench_core::spec::cpulimit::CgroupBackend;
use qbench_shaper::cgroup;

fn ours(parent: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(parent)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| cgroup::is_ours(&e.file_name().to_string_lossy()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn threads_file(backend: CgroupBackend) -> &'static str {
    match backend {
        CgroupBackend::CgroupV2 => "cgroup.threads",
        CgroupBackend::CgroupV1 => "tasks",
    }
}

/// `qbench` holding a load for `secs` under a quota of 0.2 core, in the background.
fn spawn(secs: u32) -> Child {
    Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["--objects", "4x1MB", "--client-cpu", "0.2"])
        .args(["--duration", &format!("{secs}s"), "--json", "-"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qbench starts")
}

/// The cgroup holding a thread of process `pid`, once its client threads are in it (bounded:
/// 20 s): the test's own, whatever other runs on the host hold theirs.
fn wait_for_cgroup(parent: &Path, backend: CgroupBackend, pid: u32) -> PathBuf {
    for _ in 0..400 {
        let threads: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        for dir in ours(parent) {
            let tids = std::fs::read_to_string(dir.join(threads_file(backend))).unwrap_or_default();
            if tids.lines().any(|t| threads.iter().any(|o| o == t.trim())) {
                return dir;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "no qb-<hex>-cpu cgroup holding a thread of {pid} appeared under {}",
        parent.display()
    );
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..600 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("qbench did not end within 30 s");
}

#[test]
fn the_quota_holds_the_client_threads_only_and_is_removed_after_sigterm() {
    require!(Need::Root, Need::CgroupCpu);
    let probe = cgroup::probe().unwrap();
    let mut child = spawn(20);
    let dir = wait_for_cgroup(&probe.parent, probe.backend, child.id());
    let read_quota = || match probe.backend {
        CgroupBackend::CgroupV1 => {
            let q = std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap();
            let p = std::fs::read_to_string(dir.join("cpu.cfs_period_us")).unwrap();
            format!("{} {}", q.trim(), p.trim())
        }
        CgroupBackend::CgroupV2 => std::fs::read_to_string(dir.join("cpu.max")).unwrap(),
    };
    // The threads join the cgroup when the client starts; the quota is set when its first run
    // starts, a moment later: wait for that event (bounded: 20 s), then judge the value.
    let mut quota = read_quota();
    for _ in 0..400 {
        if !quota.starts_with("-1") && !quota.starts_with("max") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        quota = read_quota();
    }
    assert_eq!(quota.trim(), "2000 10000");
    let tids: Vec<String> = std::fs::read_to_string(dir.join(threads_file(probe.backend)))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let task = |tid: &str| format!("/proc/{}/task/{tid}", child.id());
    let all: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for tid in &tids {
        assert!(
            all.contains(tid),
            "thread {tid} in the cgroup is not qbench's"
        );
    }
    let comm = |tid: &str| std::fs::read_to_string(format!("{}/comm", task(tid))).unwrap();
    let server: Vec<&String> = all
        .iter()
        .filter(|t| comm(t).starts_with("qbench-server"))
        .collect();
    assert!(
        !server.is_empty(),
        "the in-process server runs threads: {all:?}"
    );
    for t in server {
        assert!(
            !tids.contains(t),
            "server thread {t} is under the client's quota"
        );
    }
    // SIGTERM, as `timeout`, Slurm and Kubernetes stop a job (SIGINT is handled the same way).
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait(&mut child);
    assert!(
        status.code().is_some(),
        "qbench ended by a signal: {status:?}"
    );
    assert!(!dir.exists(), "{} left behind after SIGTERM", dir.display());
}

#[test]
fn a_killed_run_leaves_an_empty_cgroup_that_cleanup_removes() {
    require!(Need::Root, Need::CgroupCpu);
    let probe = cgroup::probe().unwrap();
    let mut child = spawn(20);
    let dir = wait_for_cgroup(&probe.parent, probe.backend, child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(dir.exists(), "kill -9 runs no destructor: the cgroup stays");
    // Somebody else's cgroup beside ours, named almost like it, is left alone.
    let foreign = probe.parent.join("qb-foreign-cpu");
    std::fs::create_dir(&foreign).unwrap();
    // The kernel lets go of a killed process's cgroup a moment after its parent reaped it
    // (longer on a loaded machine): up to 20 s.
    let mut removed = Vec::new();
    for _ in 0..400 {
        removed.extend(cgroup::cleanup(&Default::default()).removed);
        if !dir.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let foreign_left = foreign.exists();
    let _ = std::fs::remove_dir(&foreign);
    assert!(removed.contains(&dir.display().to_string()), "{removed:?}");
    assert!(!dir.exists());
    assert!(foreign_left, "cleanup removed a cgroup that is not ours");
}

#[test]
fn runs_record_the_quota_they_ran_under_and_its_throttling() {
    require!(Need::Root, Need::CgroupCpu);
    let probe = cgroup::probe().unwrap();
    let before = ours(&probe.parent);
    // 40 MB take a few hundred ms of client CPU: at a tenth of a core, that is throttled.
    let r = qbench(&[
        "--objects",
        "40x1MB",
        "--client-cpu",
        "0.1",
        "--client-cpuset",
        "0",
        "--client-threads",
        "2",
        "--runs",
        "2",
    ]);
    assert_complete(&r, 2, 40, 40_000_000);
    let json = r.json.unwrap();
    assert_eq!(json["config"]["client_cpu"], 0.1);
    assert_eq!(json["config"]["client_cpuset"], "0");
    for run in json["runs"].as_array().unwrap() {
        let c = &run["client_cpu"];
        assert_eq!(c["fraction"], 0.1);
        assert_eq!(c["quota_us"], 1_000);
        assert_eq!(c["period_us"], 10_000);
        assert_eq!(c["cpuset"], "0");
        let backend = serde_json::to_value(probe.backend).unwrap();
        assert_eq!(c["backend"], backend);
        // Two workers and the thread that drives them.
        assert!(c["threads"].as_u64().unwrap() >= 3, "{c}");
        assert!(
            c["throttling"]["throttled_periods"].as_u64().unwrap() > 0,
            "{c}"
        );
    }
    let left: Vec<PathBuf> = ours(&probe.parent)
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert!(left.is_empty(), "the cgroup outlived the run: {left:?}");
}

#[test]
fn compare_sides_take_turns_under_their_own_quota() {
    require!(Need::Root, Need::CgroupCpu);
    let r = common::qbench_plain(&[
        "compare",
        "--protos",
        "h3,h2",
        "--objects",
        "4x100KB",
        "--rounds",
        "2",
        "--a.client-cpu",
        "0.5",
        "--json",
        "-",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    for run in json["a"]["runs"].as_array().unwrap() {
        assert_eq!(run["client_cpu"]["quota_us"], 5_000);
    }
    for run in json["b"]["runs"].as_array().unwrap() {
        assert_eq!(run["client_cpu"]["fraction"], serde_json::Value::Null);
        assert_eq!(run["client_cpu"]["quota_us"], serde_json::Value::Null);
    }
    assert_eq!(json["a"]["config"]["client_cpu"], 0.5);
    assert!(json["b"]["config"].get("client_cpu").is_none());
}

/// A third-party client's processes join the quota and the cpuset as they start (cgroup v1's
/// cpu hierarchy here), so that the program, not qbench, is the client held: curl's TLS and
/// HTTP/2 for 20 MB take tens of milliseconds of CPU, which a twentieth of a core throttles.
#[test]
fn a_third_party_clients_processes_run_under_the_quota() {
    require!(Need::Root, Need::CgroupCpu, Need::Tool("curl"));
    let probe = cgroup::probe().unwrap();
    if probe.backend != CgroupBackend::CgroupV1 {
        let r = common::qbench_plain(&["--client", "curl", "--proto", "h2", "--client-cpu", "0.5"]);
        assert_eq!(r.code, Some(2), "{}", r.stderr);
        assert!(r.stderr.contains("--client-cpu"), "{}", r.stderr);
        return;
    }
    let r = qbench(&[
        "--client",
        "curl",
        "--proto",
        "h2",
        "--objects",
        "1x20MB",
        "--client-cpu",
        "0.05",
        "--client-cpuset",
        "0",
    ]);
    assert_complete(&r, 1, 1, 20_000_000);
    let json = r.json.unwrap();
    let run = &json["runs"][0];
    let rec = &run["client_cpu"];
    assert_eq!(rec["quota_us"], 1_000, "{rec}");
    let t = &rec["throttling"];
    assert!(t["throttled_periods"].as_u64().unwrap() >= 1, "{rec}");
    let cpu = &run["cpu"]["client"];
    let spent = cpu["user_s"].as_f64().unwrap() + cpu["sys_s"].as_f64().unwrap();
    assert!(spent > 0.0, "curl's own CPU is the client's: {cpu}");
}
