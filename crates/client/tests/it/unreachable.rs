//! Unreachable targets, from inside a network namespace this test creates: it has no routes
//! (not even an up loopback), so every connect fails locally and no packet leaves.

use crate::common;

use std::process::Command;

use common::needs::{require, Need};
use serde_json::Value;

struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!("qb-test-unreach-{}-{tag}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "ip netns add {name}");
        Self(name)
    }

    fn qbench(&self, args: &[&str]) -> (Option<i32>, String, Option<Value>) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_qbench")])
            .args(args)
            .args(["--json", "-", "--timeout", "2s"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            serde_json::from_slice(&out.stdout).ok(),
        )
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `qbench --proto PROTO --target` an address with no route, and `more`.
fn at_no_route(ns: &Netns, proto: &str, more: &[&str]) -> (Option<i32>, String, Option<Value>) {
    let base = [
        "--proto",
        proto,
        "--target",
        "https://198.18.0.1:4433",
        "--insecure",
    ];
    ns.qbench(&[&base[..], more].concat())
}

fn last_line(stderr: &str) -> &str {
    stderr.trim_end().lines().last().unwrap_or_default()
}

#[test]
fn no_route_is_unreachable() {
    require!(Need::Root, Need::Tool("ip"));
    let ns = Netns::new("route");
    for proto in ["h3", "h2", "h1"] {
        let (code, stderr, json) = at_no_route(&ns, proto, &[]);
        assert_eq!(code, Some(1), "{stderr}");
        let j = json.expect("partial report written");
        assert_eq!(j["complete"], false);
        assert_eq!(
            j["summary"]["errors"]["unreachable"], 1,
            "{proto}: {stderr}"
        );
        assert_eq!(j["runs"][0]["objects"]["not_started"], 200);
        let last = last_line(&stderr);
        assert!(
            last.starts_with("error: run 0: unreachable: ") && last.contains("198.18.0.1"),
            "{proto}: {stderr}"
        );
    }
}

#[test]
fn a_name_that_does_not_resolve_still_gets_a_report() {
    require!(Need::Root, Need::Tool("ip"));
    // No resolver can be reached from inside the namespace.
    let ns = Netns::new("name");
    let (code, stderr, json) = ns.qbench(&["--target", "https://qbench.invalid:4433"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        last_line(&stderr).starts_with("error: unreachable: cannot resolve qbench.invalid"),
        "{stderr}"
    );
    let j = json.expect("a report, though no connection was tried");
    assert_eq!(j["schema"], "qbench.run-report");
    assert_eq!(j["complete"], false);
    assert_eq!(j["summary"]["errors"]["unreachable"], 1);
    assert_eq!(j["summary"]["errors"].as_object().unwrap().len(), 1);
    assert_eq!(j["runs"][0]["objects"]["not_started"], 200);
    assert_eq!(j["runs"][0]["connections"].as_array().unwrap().len(), 0);
    assert!(j["aborted"]
        .as_str()
        .unwrap()
        .starts_with("unreachable: cannot resolve qbench.invalid"));
    assert_eq!(j["config"]["target"]["origin"]["host"], "qbench.invalid");
}

/// A held load whose every connection fails ends like any run (exit 1, a report, the error
/// counted), without starting the load on no connection at all.
#[test]
fn a_held_load_with_no_connection_ends_with_its_report() {
    require!(Need::Root, Need::Tool("ip"));
    let ns = Netns::new("held");
    for (proto, mode) in [("h2", "--rate"), ("h3", "--rate"), ("h2", "--streams")] {
        let (code, stderr, json) = at_no_route(&ns, proto, &["--duration", "1s", mode, "10"]);
        assert_eq!(code, Some(1), "{proto} {mode}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let j = json.expect("partial report written");
        assert_eq!(j["summary"]["errors"]["unreachable"], 1, "{stderr}");
        assert_eq!(j["runs"][0]["objects"]["completed"], 0);
    }
}
