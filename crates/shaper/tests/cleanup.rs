//! `qbench-shaper cleanup` beside runs still going: what a live process owns stays (one CI
//! job's cleanup must not break another's run), what a dead one left goes, `--force` takes
//! both. Each test names its own ids (`--id`), so links and cgroups of other runs on the
//! machine are neither touched nor looked at.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use common::needs::{require, Need};

const BIN: &str = env!("CARGO_BIN_EXE_qbench-shaper");

/// `qbench-shaper up` holding link `id`, once it says the link is up.
fn up(id: &str) -> Child {
    let mut child = Command::new(BIN)
        .args(["up", "rate=10mbit", "--no-calibrate", "--id", id])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("link up"), "{line}");
    child
}

fn namespaces_of(id: &str) -> Vec<String> {
    let mut v: Vec<String> = qbench_shaper::netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&format!("qb-{id}-")))
        .collect();
    v.sort();
    v
}

fn cleanup(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .arg("cleanup")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

/// Deletes what a failed assertion would leave.
struct Sweep(Vec<String>);

impl Drop for Sweep {
    fn drop(&mut self) {
        for id in &self.0 {
            for ns in namespaces_of(id) {
                let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            }
        }
    }
}

#[test]
fn cleanup_leaves_a_live_runs_link_and_force_takes_it() {
    require!(Need::Link);
    let pid = std::process::id() & 0xfff;
    let live = format!("{:x}", 0xd100_0000u32 | (pid << 4));
    let dead = format!("{:x}", 0xd100_0000u32 | (pid << 4) | 1);
    let _sweep = Sweep(vec![live.clone(), dead.clone()]);
    let mut holder = up(&live);
    let mut killed = up(&dead);
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert_eq!(namespaces_of(&live).len(), 3);
    assert_eq!(namespaces_of(&dead).len(), 3, "kill -9 leaves the link");

    let out = cleanup(&["--id", &live, "--id", &dead]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        namespaces_of(&live).len(),
        3,
        "the live run's link survived: {said}"
    );
    assert!(namespaces_of(&dead).is_empty(), "{said}");
    assert!(said.contains("removed 3 namespace(s)"), "{said}");
    assert!(
        said.contains(&format!("qb-{live}-r")) && said.contains("--force"),
        "{said}"
    );
    assert_eq!(holder.try_wait().unwrap(), None, "the holder still runs");
    let owner_file = |id: &str| {
        std::path::Path::new(qbench_shaper::owner::DIR).join(qbench_shaper::owner::link(id))
    };
    assert!(owner_file(&live).exists());
    assert!(
        !owner_file(&dead).exists(),
        "the dead run's lock file went too"
    );

    cleanup(&["--id", &live, "--force"]);
    assert!(namespaces_of(&live).is_empty());
    // The holder notices its link gone and exits as after `down`.
    assert!(holder.wait().unwrap().success());
}

#[test]
fn cleanup_leaves_an_empty_cgroup_a_live_run_owns() {
    require!(Need::Root, Need::CgroupCpu);
    use qbench_shaper::cgroup;
    let probe = cgroup::probe().unwrap();
    // Owned by this (live) process and empty, as between two runs of `--client-cpu`.
    let cg = cgroup::CpuCgroup::create(&probe).unwrap();
    let name = cg.dir().file_name().unwrap().to_string_lossy().into_owned();
    let id = &name["qb-".len()..name.len() - "-cpu".len()];
    let out = cleanup(&["--id", id]);
    assert!(
        cg.dir().exists(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    cleanup(&["--id", id, "--force"]);
    assert!(!cg.dir().exists());
}
