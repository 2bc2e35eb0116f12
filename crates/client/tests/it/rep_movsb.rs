//! On CPUs whose `rep movsb` slows on page aliasing, qbench starts itself again with glibc's
//! threshold raised and its report says so; a threshold the user set and
//! `QBENCH_REP_MOVSB=keep` are left alone, and elsewhere the report says nothing.

use std::process::Command;

use qbench_stack::rep_movsb::{parse_cpuinfo, State};

fn affected() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| parse_cpuinfo(&t).ok())
        .is_some_and(|c| c.slows_on_page_aliasing())
}

/// The report's `environment.rep_movsb_threshold` of a short run with these variables set.
fn threshold(envs: &[(&str, &str)]) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["--objects", "2x1KB", "--json", "-"])
        .env_remove("GLIBC_TUNABLES")
        .env_remove("QBENCH_REP_MOVSB")
        .envs(envs.iter().copied())
        .output()
        .expect("qbench runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["summary"]["runs"], 1, "the run's arguments survived");
    report["environment"]["rep_movsb_threshold"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn an_affected_cpu_runs_with_the_threshold_raised() {
    let expected = if affected() {
        State::Raised.describe()
    } else {
        None
    };
    assert_eq!(threshold(&[]), expected);
    // Other tunables of the user's stay, and do not count as setting the threshold.
    assert_eq!(
        threshold(&[("GLIBC_TUNABLES", "glibc.malloc.tcache_count=7")]),
        expected
    );
}

#[test]
fn keep_leaves_glibc_alone() {
    let expected = if affected() {
        State::Kept.describe()
    } else {
        None
    };
    assert_eq!(threshold(&[("QBENCH_REP_MOVSB", "keep")]), expected);
}

#[test]
fn a_threshold_the_user_set_is_theirs() {
    assert_eq!(
        threshold(&[("GLIBC_TUNABLES", "glibc.cpu.x86_rep_movsb_threshold=4096")]),
        State::User("4096".into()).describe()
    );
}

#[test]
fn a_value_that_is_neither_keep_nor_raise_is_refused_on_one_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .arg("--help")
        .env("QBENCH_REP_MOVSB", "off")
        .output()
        .expect("qbench runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "refused before anything else");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: QBENCH_REP_MOVSB: `off` is neither `keep` nor `raise`\n"
    );
    assert_eq!(threshold(&[("QBENCH_REP_MOVSB", "raise")]), threshold(&[]));
}
