//! `qbench diff OLD NEW`: two saved reports side by side, in each format, and every bad input
//! refused with the argument and file named.

use crate::common;

use common::qbench_plain;
use serde_json::Value;

/// Two reports of the same workload, h2 then h3, 4 runs each, and a third with failures.
fn reports(dir: &std::path::Path) -> (String, String) {
    let old = dir.join("old.json").to_str().unwrap().to_string();
    let new = dir.join("new.json").to_str().unwrap().to_string();
    for (proto, path) in [("h2", &old), ("h3", &new)] {
        let r = qbench_plain(&[
            "--proto",
            proto,
            "--objects",
            "20x10KB",
            "--runs",
            "4",
            "--json",
            path,
        ]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }
    (old, new)
}

#[test]
fn every_format_carries_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = reports(dir.path());
    let read =
        |p: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (o, n) = (read(&old), read(&new));

    let json = dir.path().join("diff.json");
    let r = qbench_plain(&[
        "diff",
        &old,
        &new,
        "--format",
        "json",
        "--out",
        json.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(d["schema"], "qbench.diff-report");
    assert_eq!(
        (d["old_runs"].as_u64(), d["new_runs"].as_u64()),
        (Some(4), Some(4))
    );
    assert!(
        d["config_changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == r#"proto: "h2" -> "h3""#),
        "{}",
        d["config_changes"]
    );
    let row = |name: &str| {
        d["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap()
    };
    let p99 = row("latency p99");
    assert_eq!(
        p99["old"],
        o["summary"]["object_latency"]["p99_us"].as_f64().unwrap()
    );
    assert_eq!(
        p99["new"],
        n["summary"]["object_latency"]["p99_us"].as_f64().unwrap()
    );
    let delta = p99["new"].as_f64().unwrap() - p99["old"].as_f64().unwrap();
    assert_eq!(p99["delta"].as_f64().unwrap(), delta);
    assert_eq!(row("payload bytes")["delta"], 0.0);
    // Four runs a side: each per-run figure has a test and a p.
    let verdicts = d["verdicts"].as_array().unwrap();
    let metrics: Vec<&str> = verdicts
        .iter()
        .map(|v| v["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["plt", "goodput", "rps", "p50", "p99", "p999"]);
    assert!(verdicts
        .iter()
        .all(|v| v["p"].is_f64() && v["a"]["n"] == 4 && v["b"]["n"] == 4));

    let text = qbench_plain(&["diff", &old, &new]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(
        text.stdout.starts_with(&format!(
            "qbench diff: OLD {old} (4 run(s)) -> NEW {new} (4 run(s))\n"
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("  config          proto: \"h2\" -> \"h3\""),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("  payload bytes") && text.stdout.contains("same"),
        "{}",
        text.stdout
    );
    let verdict_lines = text.stdout.lines().filter(|l| {
        l.starts_with("    ")
            && ["NEW better by", "NEW worse by", "no significant change"]
                .iter()
                .any(|v| l.contains(v))
    });
    assert_eq!(
        verdict_lines.count(),
        6,
        "a verdict line per figure: {}",
        text.stdout
    );

    let md = qbench_plain(&["diff", &old, &new, "--format", "markdown"]);
    assert!(
        md.stdout
            .contains("| figure | OLD | NEW | change |\n|---|---:|---:|---|\n"),
        "{}",
        md.stdout
    );
    assert_eq!(
        md.stdout.matches("\n| latency p").count(),
        4,
        "{}",
        md.stdout
    );

    let csv = qbench_plain(&["diff", &old, &new, "--format", "csv"]);
    let lines: Vec<&str> = csv.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "kind,figure,unit,old,new,delta,delta_pct,better_pct,verdict,p"
    );
    assert!(
        lines.iter().all(|l| l.split(',').count() == 10),
        "{}",
        csv.stdout
    );
    let p99_row = lines
        .iter()
        .find(|l| l.starts_with("summary,latency p99,"))
        .unwrap();
    assert_eq!(
        p99_row.split(',').nth(5).unwrap().parse::<f64>().unwrap(),
        delta
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("verdict,")).count(),
        6
    );
}

#[test]
fn a_report_against_itself_changes_nothing_and_one_run_gives_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.json");
    let r = qbench_plain(&[
        "--proto",
        "h1",
        "--objects",
        "5x1KB",
        "--json",
        one.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let one = one.to_str().unwrap();
    let d = qbench_plain(&["diff", one, one, "--format", "json"]);
    let d: Value = serde_json::from_str(&d.stdout).unwrap();
    assert!(d["config_changes"].as_array().unwrap().is_empty());
    for row in d["summary"].as_array().unwrap() {
        assert!(row["delta"] == 0.0 || row["delta"].is_null(), "{row}");
    }
    for v in d["verdicts"].as_array().unwrap() {
        assert_eq!(v["verdict"], "inconclusive", "{v}");
        assert_eq!(v["undecided"]["reason"], "too_few_rounds", "{v}");
    }
}

#[test]
fn bad_inputs_name_the_argument_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    let r = qbench_plain(&[
        "--proto",
        "h2",
        "--objects",
        "2x1KB",
        "--json",
        good.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let good = good.to_str().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(
        &other,
        r#"{"schema":"qbench.compare-report","schema_version":5}"#,
    )
    .unwrap();
    let missing = dir.path().join("missing.json");
    for (old, new, names) in [
        (good, missing.to_str().unwrap(), "NEW"),
        ("/dev/null", good, "OLD"),
        (good, "/dev/zero", "NEW"),
        (other.to_str().unwrap(), good, "OLD"),
        (good, dir.path().to_str().unwrap(), "NEW"),
    ] {
        let r = qbench_plain(&["diff", old, new]);
        assert_eq!(r.code, Some(2), "{old} {new}: {}", r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{}", r.stderr);
        assert!(
            lines[0].starts_with(&format!("error: {names}: ")),
            "{}",
            r.stderr
        );
        assert!(r.stdout.is_empty());
    }
    let r = qbench_plain(&["diff", good, good, "--format", "yaml"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--format"), "{}", r.stderr);
}

/// The text of the first Markdown code span in `line`, read as CommonMark does: it ends at
/// the next run of exactly as many backticks as opened it, and one space each side is
/// padding when both are there.
fn first_code_span(line: &str) -> Option<String> {
    let start = line.find('`')?;
    let rest = &line[start..];
    let n = rest.len() - rest.trim_start_matches('`').len();
    let body = &rest[n..];
    let mut i = 0;
    while i < body.len() {
        let run = body[i..].len() - body[i..].trim_start_matches('`').len();
        if run == n {
            let text = &body[..i];
            let padded = text.len() >= 2 && text.starts_with(' ') && text.ends_with(' ');
            return Some(
                if padded {
                    &text[1..text.len() - 1]
                } else {
                    text
                }
                .to_string(),
            );
        }
        i += run.max(body[i..].chars().next()?.len_utf8());
    }
    None
}

/// A report's file name with backticks in it stays whole in Markdown's code span: no
/// backtick inside ends it early.
#[test]
fn markdown_keeps_backticks_in_file_names_inside_their_code_span() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = reports(dir.path());
    for name in ["a`b.json", "``x```.json", "`edge`"] {
        let odd = dir.path().join(name);
        std::fs::copy(&old, &odd).unwrap();
        let odd = odd.to_str().unwrap();
        let r = qbench_plain(&["diff", odd, &new, "--format", "markdown"]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let head = r.stdout.lines().next().unwrap();
        assert_eq!(first_code_span(head).as_deref(), Some(odd), "{head}");
    }
}
