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
