//! The environment a report records beyond the sysctls (the interface towards the peer, the
//! CPU clock), and the warnings for a setting that limits a run: each a line on stderr, once,
//! and in the report.

use crate::common;

use std::process::Command;

use common::needs::{require, Need};
use common::qbench;
use serde_json::Value;

#[test]
fn a_loopback_run_records_its_interface_and_clock() {
    let r = qbench(&["--proto", "h2", "--objects", "2x1KB"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let env = &r.json.as_ref().unwrap()["environment"];
    let lo = &env["interfaces"][0];
    assert_eq!(
        (&lo["name"], &lo["role"]),
        (&Value::from("lo"), &Value::from("loopback")),
        "{env}"
    );
    assert_eq!(lo["mtu"], 65536);
    assert_eq!(lo["qdisc"], "noqueue");
    for flag in ["gso", "tso", "gro"] {
        assert!(lo[flag].is_boolean(), "{flag}: {lo}");
    }
    assert!(env["cpu_clock"]["clocksource"].is_string(), "{env}");
    // Whatever this machine warns about is printed once each, and recorded.
    let warned: Vec<&str> = env["warnings"]
        .as_array()
        .map(|w| w.iter().map(|l| l.as_str().unwrap()).collect())
        .unwrap_or_default();
    for w in warned {
        assert_eq!(
            r.stderr.matches(&format!("warning: {w}\n")).count(),
            1,
            "{}",
            r.stderr
        );
    }
}

/// A network namespace of the test's own whose loopback has GSO and GRO off.
struct NoOffloads(String);

impl NoOffloads {
    fn new() -> Self {
        let name = format!("qb-test-env-{}", std::process::id());
        let run = |args: &[&str]| {
            let ok = Command::new(args[0])
                .args(&args[1..])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{args:?}");
        };
        run(&["ip", "netns", "add", &name]);
        let ns = Self(name);
        run(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
        run(&[
            "ip", "netns", "exec", &ns.0, "ethtool", "-K", "lo", "gso", "off", "gro", "off",
        ]);
        ns
    }

    fn qbench(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_qbench")])
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    }
}

impl Drop for NoOffloads {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn offloads_turned_off_are_warned_about_once_with_the_fix() {
    require!(Need::Root, Need::Tool("ethtool"));
    let ns = NoOffloads::new();
    let (code, stdout, stderr) = ns.qbench(&["--proto", "h3", "--objects", "2x1KB", "--json", "-"]);
    assert_eq!(code, Some(0), "{stderr}");
    let j: Value = serde_json::from_str(&stdout).unwrap();
    let lo = &j["environment"]["interfaces"][0];
    assert_eq!(
        (&lo["gso"], &lo["gro"]),
        (&Value::Bool(false), &Value::Bool(false)),
        "{lo}"
    );
    let gso = "warning: GSO is off on lo: every packet goes through the sender's stack on its own (ethtool -K lo gso on)\n";
    let gro = "warning: GRO is off on lo: every packet goes up the receiver's stack on its own (ethtool -K lo gro on)\n";
    assert_eq!(
        (stderr.matches(gso).count(), stderr.matches(gro).count()),
        (1, 1),
        "{stderr}"
    );
    let warnings = j["environment"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("GSO is off on lo")),
        "{warnings:?}"
    );

    // A comparison's two sides share the machine: each warning is said once.
    let (code, _, stderr) = ns.qbench(&[
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "2x1KB",
        "--rounds",
        "2",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        (stderr.matches(gso).count(), stderr.matches(gro).count()),
        (1, 1),
        "{stderr}"
    );
}
