//! qbench-shaper as a user runs it (root, as CI): it builds what it says, cleans up after a
//! killed holder, and never touches namespaces it did not create.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::needs::{require, Need};

const BIN: &str = env!("CARGO_BIN_EXE_qbench-shaper");

fn namespaces() -> Vec<String> {
    qbench_shaper::netns::list()
}

/// Only namespaces named like ours: other tests on the machine create and delete theirs.
fn ours() -> Vec<String> {
    let mut v: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| qbench_shaper::Names::is_ours(n) && !qbench_testkit::others::not_judged(n))
        .collect();
    v.sort();
    v
}

/// `qbench-shaper up ARGS`, once it says the link is up.
fn up(args: &[&str]) -> std::process::Child {
    let mut child = Command::new(BIN)
        .arg("up")
        .args(args)
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

struct Foreign(String);

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn killed_holder_is_cleaned_up_and_foreign_namespaces_are_left_alone() {
    require!(Need::Link);
    let pid = std::process::id();
    // Look like ours but are not: not hex, not a c/r/s role.
    let foreign: Vec<Foreign> = [format!("qb-keep{pid}-x"), format!("qb-zz{pid}-c")]
        .into_iter()
        .map(|n| {
            let added = Command::new("ip").args(["netns", "add", &n]).status();
            assert!(added.unwrap().success(), "ip netns add {n}");
            Foreign(n)
        })
        .collect();
    let id = format!("{:x}", 0xa000_0000u32 | (pid & 0xffff));
    let mut up = up(&["rate=10mbit,rtt=10ms", "--id", &id]);
    let mine = [
        format!("qb-{id}-c"),
        format!("qb-{id}-r"),
        format!("qb-{id}-s"),
    ];
    assert!(mine.iter().all(|n| namespaces().contains(n)));
    up.kill().unwrap();
    up.wait().unwrap();
    assert!(
        mine.iter().all(|n| namespaces().contains(n)),
        "a killed holder leaves its link"
    );

    let out = Command::new(BIN).arg("cleanup").output().unwrap();
    assert!(out.status.success());
    let now = namespaces();
    assert!(
        mine.iter().all(|n| !now.contains(n)),
        "cleanup removed the link: {now:?}"
    );
    assert!(
        foreign.iter().all(|f| now.contains(&f.0)),
        "cleanup left foreign namespaces: {now:?}"
    );
}

#[test]
fn dry_run_and_bad_input() {
    let _g = qbench_testkit::machine();
    let before = ours();
    let out = Command::new(BIN)
        .args(["up", "rate=10mbit,loss=1%", "--dry-run"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("tbf rate 10000000bit"), "{script}");
    assert_eq!(ours(), before);

    let out = Command::new(BIN)
        .args(["up", "rate=10mbit,bandwidth=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bandwidth"));

    let out = Command::new(BIN)
        .args(["down", "--id", "fffffff0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no link with id"));
}

#[test]
fn a_second_up_with_a_live_id_fails_and_leaves_the_live_link() {
    require!(Need::Link);
    let id = format!("{:x}", 0xb000_0000u32 | (std::process::id() & 0xffff));
    let mut first = up(&["rate=10mbit", "--id", &id]);
    let mine = [
        format!("qb-{id}-c"),
        format!("qb-{id}-r"),
        format!("qb-{id}-s"),
    ];
    let second = Command::new(BIN)
        .args(["up", "rate=20mbit", "--id", &id])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("is up already"), "{err}");
    assert!(
        mine.iter().all(|n| namespaces().contains(n)),
        "the live link survived: {:?}",
        ours()
    );
    let down = Command::new(BIN)
        .args(["down", "--id", &id])
        .status()
        .unwrap();
    assert!(down.success());
    first.wait().unwrap();
    assert!(mine.iter().all(|n| !namespaces().contains(n)));
}

/// `up` ends as `down` would on SIGINT, SIGTERM (a supervisor, `timeout`) and SIGHUP (a closed
/// terminal): the link's namespaces go.
#[test]
fn every_stopping_signal_takes_the_link_down() {
    require!(Need::Link);
    for (n, sig) in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
        .into_iter()
        .enumerate()
    {
        let id = format!(
            "{:x}",
            0xc000_0000u32 | ((std::process::id() & 0xfff) << 4) | n as u32
        );
        let mut holder = up(&["rate=10mbit", "--id", &id]);
        let router = format!("qb-{id}-r");
        assert!(namespaces().contains(&router));
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(holder.id() as i32, sig) };
        let status = holder.wait().unwrap();
        assert!(status.success(), "signal {sig}: {status}");
        assert!(
            !ours().iter().any(|ns| ns.contains(&id)),
            "signal {sig} left {:?}",
            ours()
        );
    }
}
