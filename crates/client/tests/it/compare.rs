//! `qbench compare`: rounds alternate the sides, statistics cover every round, and bad input
//! is refused before anything runs.

use serde_json::Value;

use crate::common;

fn compare(args: &[&str]) -> (Option<i32>, String, Option<Value>) {
    let r = common::qbench(&[&["compare"], args].concat());
    (r.code, r.stderr, r.json)
}

#[test]
fn rounds_alternate_and_statistics_cover_them() {
    let (code, stderr, json) =
        compare(&["--protos", "h2,h3", "--objects", "20x5KB", "--rounds", "4"]);
    assert_eq!(code, Some(0), "{stderr}");
    let j = json.unwrap();
    assert_eq!(j["schema"], "qbench.compare-report");
    assert_eq!(j["first"], serde_json::json!(["a", "b", "a", "b"]));
    assert_eq!(
        (j["label_a"].as_str(), j["label_b"].as_str()),
        (Some("h2"), Some("h3"))
    );
    for side in ["a", "b"] {
        let runs = j[side]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 4);
        assert!(runs
            .iter()
            .all(|r| r["complete"] == true && r["payload_bytes"] == 100_000));
    }
    assert_eq!(j["a"]["config"]["proto"], "h2");
    assert_eq!(j["b"]["config"]["proto"], "h3");
    let c = &j["comparison"];
    assert_eq!(j["schema_version"], 6);
    assert_eq!(c["metric"], "plt");
    // Mann-Whitney by default, its effect with an interval around its estimate.
    assert_eq!(c["test"], "mann-whitney");
    assert!(c["p"].as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)));
    let e = &c["effect"];
    let (lo, est, hi) = (
        e["rel_low_pct"].as_f64().unwrap(),
        e["rel_pct"].as_f64().unwrap(),
        e["rel_high_pct"].as_f64().unwrap(),
    );
    assert!(lo <= est && est <= hi, "{e}");
    assert_eq!(e["level"], 0.95);
    assert!(j.get("auto_rounds").is_none());
    assert_eq!(c["a"]["n"], 4);
    assert_eq!(c["b"]["n"], 4);
    assert!(c["welch"]["p"]
        .as_f64()
        .is_some_and(|p| (0.0..=1.0).contains(&p)));
    // 4 rounds a side: Mann-Whitney cannot reach p < 0.01, said before the rounds and in the
    // verdict, with the rounds that would do.
    assert_eq!(c["verdict"], "inconclusive");
    assert_eq!(c["undecided"]["reason"], "too_few_rounds");
    assert_eq!(c["undecided"]["needed"], 5);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("warning: --rounds 4: Mann-Whitney U with 4 rounds a side cannot"),
        "{stderr}"
    );
    let line = |name: &str| {
        stderr
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line: {stderr}"))
            .to_string()
    };
    assert!(line("test ").contains("Mann-Whitney U, U = "), "{stderr}");
    assert!(
        line("effect ").contains("positive: B better; B's PLT "),
        "{stderr}"
    );
    assert!(
        line("verdict ").contains("inconclusive: with 4 rounds a side")
            && line("verdict ").contains("run 5 rounds or more"),
        "{stderr}"
    );
}

/// An A/A control: one configuration against itself when named twice, the sides labelled
/// apart; the same configuration by accident (`--proto` alone) is refused.
#[test]
fn an_aa_control_compares_a_configuration_with_itself() {
    let (code, stderr, json) =
        compare(&["--protos", "h2,h2", "--objects", "5x5KB", "--rounds", "5"]);
    assert_eq!(code, Some(0), "{stderr}");
    let j = json.unwrap();
    assert_eq!(
        (j["label_a"].as_str(), j["label_b"].as_str()),
        (Some("h2 (A)"), Some("h2 (B)"))
    );
    assert_eq!(j["a"]["config"], j["b"]["config"]);
    assert!(!stderr.contains("warning: --rounds"), "{stderr}");
    assert!(stderr.contains("A = h2 (A), B = h2 (B)"), "{stderr}");
}

#[test]
fn per_side_options_reach_their_side_only() {
    let (code, stderr, json) = compare(&[
        "--proto",
        "h3",
        "--a.cwnd-cap",
        "4",
        "--objects",
        "1x500KB",
        "--rounds",
        "2",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let j = json.unwrap();
    assert_eq!(j["label_a"], "h3 cwnd-cap=4");
    let cap_a = &j["a"]["runs"][0]["telemetry"][0]["cwnd_cap_bytes"];
    let cap_b = &j["b"]["runs"][0]["telemetry"][0]["cwnd_cap_bytes"];
    assert!(cap_a.as_u64().is_some_and(|c| c > 0), "{cap_a}");
    assert!(cap_b.is_null(), "{cap_b}");
}

#[test]
fn plot_puts_both_sides_on_one_chart() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("cwnd.svg");
    let (code, stderr, _) = compare(&[
        "--protos",
        "h2,h3",
        "--objects",
        "1x1MB",
        "--rounds",
        "2",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let text = std::fs::read_to_string(svg).unwrap();
    assert_eq!(text.matches("<polyline").count(), 2, "one line per side");
    assert!(text.contains("h2: tcp") && text.contains("h3: quic"));
}

/// Held loads compare round by round: at a rate by the p99 (the default) or a chosen
/// metric, in a closed loop by goodput; every round's figure is its run's.
#[test]
fn held_loads_compare_by_their_metric() {
    let (code, stderr, json) = compare(&[
        "--protos",
        "h2,h3",
        "--objects",
        "1x2KB",
        "--rounds",
        "2",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
        "--rate",
        "200",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let j = json.unwrap();
    let c = &j["comparison"];
    assert_eq!(c["metric"], "p99");
    assert!(stderr.contains("comparing p99 latency"), "{stderr}");
    assert!(stderr.contains("late, dropped"), "{stderr}");
    for side in ["a", "b"] {
        let runs = j[side]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        let p99: Vec<f64> = runs
            .iter()
            .map(|r| {
                assert_eq!(r["load"]["target_rate"], 200.0);
                r["object_latency"]["p99_us"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(c[side]["n"], 2);
        assert_eq!(
            c[side]["min"].as_f64(),
            p99.iter().copied().reduce(f64::min)
        );
    }

    let (code, stderr, json) = compare(&[
        "--protos",
        "h2,h3",
        "--objects",
        "1x20KB",
        "--rounds",
        "2",
        "--duration",
        "300ms",
        "--streams",
        "2",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let j = json.unwrap();
    assert_eq!(j["comparison"]["metric"], "goodput");
    assert!(j["comparison"]["a"]["mean"]
        .as_f64()
        .is_some_and(|g| g > 0.0));
    assert!(stderr.contains("Mbit/s"), "{stderr}");

    let (code, stderr, json) = compare(&[
        "--protos",
        "h2,h3",
        "--objects",
        "1x1KB",
        "--rounds",
        "2",
        "--metric",
        "rps",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let c = &json.unwrap()["comparison"];
    assert_eq!(c["metric"], "rps");
    assert_eq!(c["a"]["n"], 2);
}

#[test]
fn bad_comparisons_are_refused() {
    for (args, flag) in [
        (&["--protos", "h2"][..], "--protos"),
        (&["--protos", "h2,h3", "--rounds", "1"][..], "--rounds"),
        (&["--protos", "h2,h3", "--rounds", "some"][..], "--rounds"),
        (
            &["--protos", "h2,h3", "--min-rounds", "5"][..],
            "--min-rounds",
        ),
        (
            &["--protos", "h2,h3", "--precision", "2%"][..],
            "--precision",
        ),
        (
            &["--protos", "h2,h3", "--rounds", "auto", "--min-rounds", "1"][..],
            "--min-rounds",
        ),
        (
            &[
                "--protos",
                "h2,h3",
                "--rounds",
                "auto",
                "--min-rounds",
                "9",
                "--max-rounds",
                "5",
            ][..],
            "--max-rounds",
        ),
        (
            &["--protos", "h2,h3", "--rounds", "auto", "--precision", "0%"][..],
            "--precision",
        ),
        (&["--protos", "h2,h3", "--test", "student"][..], "--test"),
        (&["--protos", "h2,h3", "--runs", "3"][..], "--runs"),
        (&["--proto", "h3"][..], "both sides"),
        (&["--protos", "h2,h3", "--reuse"][..], "--reuse"),
        (&["--protos", "h2,h3", "--a.cc", "vegas"][..], "--a.cc"),
        (
            &["--protos", "h2,h3", "--state-graph", "x.dot"][..],
            "--state-graph",
        ),
    ] {
        let (code, stderr, json) = compare(args);
        assert_ne!(code, Some(0), "{args:?} accepted");
        assert!(json.is_none());
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error") && first.contains(flag),
            "{args:?}: {stderr}"
        );
    }
}

/// `--rounds auto` runs until the interval is as narrow as asked, or to the maximum, and says
/// which; every round is in the report either way.
#[test]
fn auto_rounds_stop_at_the_precision_or_the_maximum() {
    for (precision, max) in [("100%", "8"), ("0.001%", "5")] {
        let (code, stderr, json) = compare(&[
            "--protos",
            "h2,h3",
            "--objects",
            "10x5KB",
            "--rounds",
            "auto",
            "--min-rounds",
            "4",
            "--max-rounds",
            max,
            "--precision",
            precision,
            "--test",
            "welch",
        ]);
        assert_eq!(code, Some(0), "{stderr}");
        let j = json.unwrap();
        let rounds = j["rounds"].as_u64().unwrap();
        assert_eq!(j["first"].as_array().unwrap().len() as u64, rounds);
        for side in ["a", "b"] {
            assert_eq!(j[side]["runs"].as_array().unwrap().len() as u64, rounds);
            assert_eq!(j[side]["complete"], true);
        }
        let auto = &j["auto_rounds"];
        assert_eq!(auto["rule"]["max"].as_u64(), max.parse().ok());
        let c = &j["comparison"];
        assert_eq!(c["test"], "welch");
        let half = (c["effect"]["rel_high_pct"].as_f64().unwrap()
            - c["effect"]["rel_low_pct"].as_f64().unwrap())
            / 2.0;
        match auto["stopped"].as_str().unwrap() {
            "settled" => {
                assert!((4..=8).contains(&rounds), "{rounds}");
                assert!(half <= 100.0, "{half}");
                assert!(stderr.contains("auto, stopped after"), "{stderr}");
            }
            "max_rounds" => {
                assert_eq!(rounds, max.parse::<u64>().unwrap());
                assert!(stderr.contains("ran the maximum"), "{stderr}");
            }
            other => panic!("{other}"),
        }
        if precision == "0.001%" {
            assert_eq!(auto["stopped"], "max_rounds");
        }
    }
}

/// Every run long enough to span clock ticks records the machine's steal time and load; a
/// threshold no run can exceed keeps every round, and a bad threshold is refused.
#[test]
fn noise_is_recorded_per_run() {
    let (code, stderr, json) = compare(&[
        "--protos",
        "h2,h3",
        "--objects",
        "1x100MB",
        "--rounds",
        "2",
        "--steal-threshold",
        "100%",
        "--discard-noisy",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let j = json.unwrap();
    // Other tests running beside this one may make the machine busy: only that may flag a run.
    let busy_only = |causes: &Value| {
        causes
            .as_array()
            .is_none_or(|c| c.iter().all(|c| c.get("busy_others").is_some()))
    };
    for d in j["discarded"].as_array().cloned().unwrap_or_default() {
        assert!(busy_only(&d["causes"]), "{d}");
    }
    for side in ["a", "b"] {
        for run in j[side]["runs"].as_array().unwrap() {
            let n = &run["noise"];
            let steal = n["steal_pct"].as_f64().unwrap();
            let busy = n["busy_pct"].as_f64().unwrap();
            assert!(
                (0.0..=100.0).contains(&steal) && (0.0..=100.0).contains(&busy),
                "{n}"
            );
            assert!(busy_only(&n["causes"]), "{n}");
            assert!(n["ticks"].as_u64().unwrap() > 0, "{n}");
        }
    }
    assert!(
        stderr.contains("noise") && stderr.contains("runs noisy"),
        "{stderr}"
    );
    let (code, stderr, _) = compare(&["--protos", "h2,h3", "--steal-threshold", "0%"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.lines().next().unwrap().contains("--steal-threshold"),
        "{stderr}"
    );
}

/// A stopping signal between or during rounds ends the comparison with its report: the
/// rounds run so far, in pairs, and `aborted` naming the signal, at the top and on each side.
#[test]
fn a_stopping_signal_writes_the_comparison_with_aborted_set() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let args = [
        "compare",
        "--protos",
        "h2,h1",
        "--objects",
        "1x50MB",
        "--rounds",
        "40",
    ];
    let child = common::spawn_with_json(&args, &json);
    // The report is rewritten after each round: the first is done once it exists.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !json.exists() {
        assert!(std::time::Instant::now() < deadline, "no round finished");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    common::send(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: interrupted (SIGTERM) during round "),
        "{stderr}"
    );
    let j: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["complete"], false);
    let why = j["aborted"].as_str().unwrap();
    assert!(
        why.starts_with("interrupted (SIGTERM) during round "),
        "{why}"
    );
    let rounds = j["rounds"].as_u64().unwrap();
    assert!((1..40).contains(&rounds), "{rounds}");
    assert_eq!(j["first"].as_array().unwrap().len() as u64, rounds);
    for side in ["a", "b"] {
        assert_eq!(j[side]["aborted"], why, "{side}");
        assert_eq!(j[side]["runs"].as_array().unwrap().len() as u64, rounds);
    }
}

/// `compare --help` lists no flag that compare refuses, and each of them, given, is refused
/// (exit 2) naming it.
#[test]
fn compare_help_lists_no_flag_it_refuses() {
    let help = common::qbench_plain(&["compare", "--help"]);
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    for (flag, value) in [
        ("--qlog", Some("q")),
        ("--log-requests", Some("r.tsv")),
        ("--hgrm", Some("h.hgrm")),
        ("--state-graph", Some("g.dot")),
        ("--metrics-listen", Some("127.0.0.1:0")),
        ("--tui", None),
        ("--interval", Some("1s")),
        ("--json-stream", Some("s.json")),
        ("--shard", Some("1/2")),
        ("--start-at", Some("+1s")),
        ("--runs", Some("2")),
        ("--reuse", None),
        ("--fail-early", None),
        ("--qlog-sample", Some("0.5")),
    ] {
        let listed = help
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{flag} ")) || l.trim() == flag);
        assert!(!listed, "compare --help lists {flag}:\n{}", help.stdout);
        let mut args = vec![
            "compare",
            "--protos",
            "h2,h3",
            "--objects",
            "1x1KB",
            "--rounds",
            "2",
        ];
        if flag == "--fail-early" {
            args.extend(["--fail-if", "b-worse>50%"]);
        }
        args.push(flag);
        args.extend(value);
        let r = common::qbench_plain(&args);
        assert_eq!(r.code, Some(2), "{flag}: {}", r.stderr);
        let named = if flag == "--qlog-sample" {
            "--qlog"
        } else {
            flag
        };
        assert!(r.stderr.contains(named), "{flag}: {}", r.stderr);
    }
}
