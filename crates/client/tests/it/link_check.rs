//! Calibration across `--link` (root, as CI runs): the report records the link as measured
//! against the link as asked, a field the machine cannot carry is warned about by name, and
//! `--strict-link` refuses to run over it and leaves nothing behind.

use crate::common;

use common::links::ours;
use common::needs::{require, Need};
use common::{assert_complete, qbench, qbench_plain, refused};
use serde_json::Value;

fn check<'a>(link: &'a Value, field: &str) -> &'a Value {
    link["calibration"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["field"] == field)
        .unwrap_or_else(|| panic!("no {field} in {}", link["calibration"]))
}

#[test]
fn the_report_records_the_link_as_measured() {
    require!(Need::Link);
    // Up to 3 runs, judged by the first whose calibration met every field: its round trip is
    // measured once, and a loaded machine's delay path can put its median past the 2 ms
    // tolerance in one run; a link built wrong misses in every run.
    let mut missed = Vec::new();
    let r = loop {
        let r = qbench(&[
            "--proto",
            "h2",
            "--objects",
            "2x100KB",
            "--link",
            "rate=20mbit,rtt=40ms,up.rate=5mbit",
        ]);
        if !r.stderr.contains("warning: --link") || missed.len() == 2 {
            break r;
        }
        missed.push(r.stderr);
    };
    assert_complete(&r, 1, 2, 200_000);
    let j = r.json.as_ref().unwrap();
    let link = &j["link"];
    let c = &link["calibration"];
    let fields: Vec<&str> = c["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "rtt",
            "up.loss",
            "up.rate",
            "up.reorder",
            "down.loss",
            "down.rate",
            "down.reorder"
        ]
    );
    // Each direction's flow arrived at its own rate, measured in the namespaces (by its last
    // flood: one a busy machine's pause spoiled is measured again, and the summary says so).
    for (dir, bps) in [("up", 5e6), ("down", 20e6)] {
        let got = c[dir]["flood"]["received_bps"].as_f64().unwrap();
        assert!((got / bps - 1.0).abs() < 0.03, "{dir}: {got}");
        let again = c[dir]["flood"]["missed_before"]
            .as_array()
            .map_or(0, Vec::len);
        let said = format!("{dir}.rate took {} floods", again + 1);
        assert_eq!(again > 0, r.stderr.contains(&said), "{said}\n{}", r.stderr);
        assert_eq!(
            check(link, &format!("{dir}.rate"))["asked"],
            format!("{:.2} Mbit/s", bps / 1e6)
        );
    }
    // The round trip as measured: the delay once (not twice, not left out); a machine running
    // the suite twice at once adds up to a few milliseconds at the median (41.6 ms was seen),
    // which the calibration's own check reports.
    let p50 = c["rtt"]["p50_us"].as_u64().unwrap();
    assert!((40_000..45_000).contains(&p50), "{p50}");
    assert!(c["elapsed_ms"].as_u64().unwrap() > 0);
    // The calibration's own packets are not the run's: the forwarders' counters of the run
    // hold the run's bytes alone (100 KB twice plus framing), while the link's hold both.
    let run_down: u64 = j["runs"][0]["noise"]["forwarders"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f[0].as_str().unwrap().ends_with("dn"))
        .map(|f| f[1]["bytes"].as_u64().unwrap())
        .sum();
    assert!((200_000..400_000).contains(&run_down), "{run_down}");
    assert!(
        !r.stderr.contains("warning: --link"),
        "{}\nearlier runs:\n{}",
        r.stderr,
        missed.join("\n")
    );
    // The summary says the median the report holds (within its bound above, not a fixed
    // figure: a busy machine's delay path adds a little).
    let said = format!(
        "link measured  all 7 fields within tolerance (median RTT {:.2} ms",
        p50 as f64 / 1000.0
    );
    assert!(r.stderr.contains(&said), "{said}\n{}", r.stderr);
}

#[test]
fn a_rate_the_machine_cannot_carry_is_warned_about_and_refused_when_strict() {
    require!(Need::Link);
    let before = ours();
    let args = [
        "--proto",
        "h3",
        "--objects",
        "1x10KB",
        "--link",
        "rate=400gbit",
    ];
    let r = qbench(&args);
    assert_complete(&r, 1, 1, 10_000);
    for dir in ["up", "down"] {
        let warned = format!("warning: --link: link field `{dir}.rate`: measured ");
        assert!(r.stderr.contains(&warned), "{}", r.stderr);
        let k = check(&r.json.as_ref().unwrap()["link"], &format!("{dir}.rate"));
        assert_eq!(k["ok"], false);
        assert!(
            k["note"].as_str().unwrap().contains("cannot fill the link"),
            "{k}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let strict = qbench_plain(
        &[
            &args[..],
            &["--strict-link", "--json", json.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(strict.code, Some(1), "{}", strict.stderr);
    let last = strict.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: --link: --strict-link: link field `up.rate`: measured"),
        "{last}"
    );
    assert!(!json.exists(), "no run, no report");
    assert_eq!(ours(), before, "the refused link is taken down");
}

#[test]
fn calibration_can_be_turned_off_and_strictness_needs_it() {
    require!(Need::Link);
    let r = qbench(&[
        "--proto",
        "h1",
        "--objects",
        "1x1KB",
        "--link",
        "rtt=2ms",
        "--no-calibrate",
    ]);
    assert_complete(&r, 1, 1, 1_000);
    assert!(r.json.as_ref().unwrap()["link"]
        .get("calibration")
        .is_none());
    let one = ["--objects", "1x1KB"];
    refused(
        &[
            &one[..],
            &["--link", "rtt=2ms", "--no-calibrate", "--strict-link"],
        ]
        .concat(),
        "--strict-link",
    );
    refused(&[&one[..], &["--strict-link"]].concat(), "--link");
    refused(&[&one[..], &["--no-calibrate"]].concat(), "--link");
}

#[test]
fn bad_delivery_traces_are_refused_naming_the_file_and_line() {
    require!(Need::Link);
    let before = ours();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("empty", "", "line 0: no delivery opportunities"),
        ("backwards", "5\n9\n7\n", "line 3: 7 ms comes after 9 ms"),
        ("words", "1\nsoon\n", "line 2: `soon` is not a whole number"),
        ("zero", "0\n0\n", "must be later"),
    ];
    for (name, text, says) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let link = format!("down.rate=mahimahi:{}", path.display());
        let r = qbench_plain(&["--objects", "1x1KB", "--link", &link]);
        assert_eq!(r.code, Some(2), "{name}: {}", r.stderr);
        let err = r.stderr.trim();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&path.display().to_string()) && err.contains(says),
            "{err}"
        );
    }
    // A device that never ends is cut at the limit, not read forever.
    let r = qbench_plain(&["--objects", "1x1KB", "--link", "up.rate=mahimahi:/dev/zero"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("/dev/zero"), "{}", r.stderr);
    assert_eq!(ours(), before);
}

/// `compare --recalibrate`: the link is measured again before every round after the first,
/// each measurement in both sides' reports, and a field the machine cannot carry (400 Gbit/s)
/// is warned about with its round. Without --link the flag is refused.
#[test]
fn compare_measures_the_link_between_rounds() {
    require!(Need::Link);
    let before = ours();
    let r = qbench(&[
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "1x20KB",
        "--rounds",
        "3",
        "--link",
        "rate=400gbit,rtt=4ms",
        "--no-calibrate",
        "--recalibrate",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json.as_ref().unwrap();
    assert_eq!(j["complete"], true, "{}", r.stderr);
    for side in ["a", "b"] {
        let link = &j[side]["link"];
        assert!(link.get("calibration").is_none(), "{link}");
        let again = link["recalibrations"].as_array().unwrap();
        let rounds: Vec<u64> = again
            .iter()
            .map(|x| x["before_round"].as_u64().unwrap())
            .collect();
        assert_eq!(rounds, [1, 2], "{side}");
        for x in again {
            let missed: Vec<&str> = x["calibration"]["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|k| k["ok"] == false)
                .map(|k| k["field"].as_str().unwrap())
                .collect();
            assert!(
                missed.contains(&"up.rate") && missed.contains(&"down.rate"),
                "{missed:?}"
            );
        }
    }
    for round in [1, 2] {
        let want = format!("warning: --link before round {round}: link field `up.rate`");
        assert!(r.stderr.contains(&want), "{}", r.stderr);
    }
    assert_eq!(ours(), before);
    refused(
        &["compare", "--protos", "h2,h3", "--recalibrate"],
        "--recalibrate",
    );
}

/// A stopping signal while `compare --recalibrate` measures the link between rounds ends the
/// measurement within a poll, not after it: the report says the signal came while the link
/// was measured, the rounds so far are kept, and nothing is left behind. The report is
/// rewritten after each round, just before the measurement starts, so its first rewrite with
/// a round in it is the moment to signal; a 1 s round trip makes the measurement seconds long.
#[test]
fn a_signal_ends_the_measurement_between_rounds() {
    require!(Need::Link);
    let before = ours();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let mut child = common::signalable()
        .args([
            "compare",
            "--protos",
            "h2,h3",
            "--objects",
            "1x1KB",
            "--rounds",
            "3",
        ])
        .args(["--link", "rtt=1s", "--recalibrate", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rounds = |v: &Value| v["first"].as_array().map_or(0, Vec::len);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let doc = std::fs::read(&json)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        if doc.as_ref().is_some_and(|d| rounds(d) >= 1) {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "compare ended first");
        assert!(std::time::Instant::now() < deadline, "no round was written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    common::interrupt(&child);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let j: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        j["aborted"], "interrupted (SIGINT) while --link was measured before round 1",
        "{stderr}"
    );
    assert_eq!(rounds(&j), 1, "{j}");
    assert_eq!(ours(), before);
}
