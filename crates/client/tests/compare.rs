//! `qbench compare`: rounds alternate the sides, statistics cover every round, and bad input
//! is refused before anything runs.

use serde_json::Value;

mod common;

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
    assert_eq!(c["plt_us_a"]["n"], 4);
    assert_eq!(c["plt_us_b"]["n"], 4);
    assert!(c["welch"]["p"]
        .as_f64()
        .is_some_and(|p| (0.0..=1.0).contains(&p)));
    assert!(["a_faster", "b_faster", "inconclusive"].contains(&c["verdict"].as_str().unwrap()));
    assert!(
        stderr.contains("Welch's t-test") && stderr.contains("verdict"),
        "{stderr}"
    );
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

#[test]
fn bad_comparisons_are_refused() {
    for (args, flag) in [
        (&["--protos", "h2"][..], "--protos"),
        (&["--protos", "h2,h3", "--rounds", "1"][..], "--rounds"),
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
