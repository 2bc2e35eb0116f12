//! `.hgrm` output: `--hgrm` after a run and `qbench hgrm` on a saved report write the same
//! distribution; histograms a run does not have, and unreadable reports, are refused by name.
//! (scripts/ci/hgrm_check.sh compares the text with HdrHistogram's JavaScript port.)

use crate::common;

use common::qbench_plain;

#[test]
fn flag_and_command_write_the_same_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let (hgrm, json) = (dir.path().join("a.hgrm"), dir.path().join("a.json"));
    let run = qbench_plain(&[
        "--proto",
        "h2",
        "--objects",
        "200x1KB",
        "--hgrm",
        hgrm.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let text = std::fs::read_to_string(&hgrm).unwrap();
    assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
    assert!(text.contains("Total count    =          200]"), "{text}");
    let again = qbench_plain(&["hgrm", json.to_str().unwrap()]);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.stdout, text);
    let ttfb = qbench_plain(&["hgrm", json.to_str().unwrap(), "--of", "ttfb"]);
    assert_eq!(ttfb.code, Some(0));
    assert_ne!(ttfb.stdout, text, "TTFB is another histogram");

    for (args, want) in [
        (
            vec!["hgrm", json.to_str().unwrap(), "--of", "service-time"],
            "--of: service-time is recorded by an open loop",
        ),
        (
            vec!["hgrm", "/nonexistent/r.json"],
            "REPORT: /nonexistent/r.json",
        ),
        (
            vec!["--objects", "2x1KB", "--hgrm", "/nonexistent/dir/a.hgrm"],
            "--hgrm",
        ),
        (
            vec!["compare", "--protos", "h2,h3", "--hgrm", "x.hgrm"],
            "--hgrm",
        ),
    ] {
        let r = qbench_plain(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(want),
            "{args:?}: {}",
            r.stderr
        );
    }
}

/// A report whose histogram does not decode is bad input for every command that reads it:
/// exit 2, one line naming the argument, the file and the histogram's field.
#[test]
fn a_corrupt_histogram_is_refused_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    let g = good.to_str().unwrap();
    let run = qbench_plain(&["--proto", "h2", "--objects", "3x1KB", "--json", g]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    let hdr = r["runs"][0]["ttfb"]["hdr"].as_str().unwrap().to_string();
    r["runs"][0]["ttfb"]["hdr"] = serde_json::Value::from(&hdr[..hdr.len() / 2]);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r.to_string()).unwrap();
    let b = bad.to_str().unwrap();
    let html = dir.path().join("p.html");
    for (args, what) in [
        (vec!["hgrm", b], "REPORT"),
        (vec!["hgrm", b, "--of", "ttfb"], "REPORT"),
        (vec!["diff", b, g], "OLD"),
        (vec!["diff", g, b, "--format", "json"], "NEW"),
        (
            vec!["report", b, "--html", html.to_str().unwrap()],
            "REPORT",
        ),
        // Before it looks for criterion's results, which this test has none of.
        (vec!["cost", b, "--criterion", g], "REPORT"),
    ] {
        let out = qbench_plain(&args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
        let line = out.stderr.trim_end();
        assert!(
            line.starts_with(&format!("error: {what}: ")) && line.contains(b),
            "{args:?}: {line}"
        );
        assert!(line.contains("`runs[0].ttfb.hdr`"), "{args:?}: {line}");
    }
    assert!(!html.exists());
}

/// A compare report's histograms are checked as a run report's are: `report` refuses a
/// corrupt one naming its file and field, and draws no page.
#[test]
fn a_corrupt_histogram_in_a_compare_report_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("c.json");
    let run = qbench_plain(&[
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "2x1KB",
        "--rounds",
        "2",
        "--json",
        good.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let text = std::fs::read_to_string(&good).unwrap();
    let key = text.find("\"hdr\":").expect("a histogram") + 6;
    let at = key + text[key..].find('"').unwrap() + 1;
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, format!("{}AAAA{}", &text[..at + 8], &text[at + 12..])).unwrap();
    let html = dir.path().join("p.html");
    let out = qbench_plain(&[
        "report",
        bad.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let line = out.stderr.trim_end();
    assert!(
        line.starts_with("error: REPORT: ") && line.contains("bad.json") && line.contains(".hdr`"),
        "{line}"
    );
    assert!(!html.exists());
}
