//! Every file qbench reads is read within a size limit that holds while reading: an endless
//! input (`/dev/zero`, a FIFO) is refused with a one-line error naming the file and the
//! limit, instead of being read until memory runs out.

use crate::common;

use common::needs::{require, Need};

/// `qbench ARGS` exits 2, its first line naming /dev/zero and the limit `says`.
fn refused_at_limit(args: &[&str], says: &str) {
    let r = common::qbench_within(args, 60);
    let first = r.stderr.lines().next().unwrap_or_default();
    assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
    assert!(
        first.starts_with("error: ") && first.contains("/dev/zero") && first.contains(says),
        "{args:?}: {}",
        r.stderr
    );
}

#[test]
fn an_endless_input_is_refused_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["merge", "/dev/zero", "-o", out],
            "268435456 bytes, the limit for a report",
        ),
        (&["hgrm", "/dev/zero"], "the limit for a report"),
        (
            &["sweep", "/dev/zero", "--out", out],
            "the limit for a scenario",
        ),
        (&["--page", "/dev/zero"], "the limit for a HAR file"),
        (
            &["--ca", "/dev/zero", "--target", "https://127.0.0.1:9"],
            "the limit for a PEM file",
        ),
    ];
    for (args, says) in cases {
        refused_at_limit(args, says);
    }
}

/// Without root a link is refused for that, before its rate trace is read.
#[test]
fn an_endless_rate_trace_is_refused_at_its_limit() {
    require!(Need::Link);
    refused_at_limit(
        &["--link", "rate=trace:/dev/zero", "--objects", "1x1KB"],
        "the limit for a rate trace",
    );
}

/// `qbench merge` of real shards whose files were edited: a sum that would wrap is refused
/// naming the file and the field, and a hostname with terminal escapes is shown escaped.
#[test]
fn merge_checks_what_its_shards_say() {
    let dir = tempfile::tempdir().unwrap();
    let shard = |i: u32| {
        let path = dir.path().join(format!("s{i}.json"));
        let r = common::qbench_plain(&[
            "--proto",
            "h2",
            "--objects",
            "10x1KB",
            "--connections",
            "2",
            "--no-telemetry",
            "--shard",
            &format!("{i}/2"),
            "--json",
            path.to_str().unwrap(),
        ]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        (path, v)
    };
    let (p0, _) = shard(0);
    let (p1, mut v1) = shard(1);
    let s0 = p0.to_str().unwrap();
    let s1 = p1.to_str().unwrap();
    let out = dir.path().join("m.json");
    let merge = || common::qbench_plain(&["merge", s0, s1, "-o", out.to_str().unwrap()]);

    let honest = v1.clone();
    v1["runs"][0]["payload_bytes"] = serde_json::json!(u64::MAX);
    std::fs::write(&p1, v1.to_string()).unwrap();
    let r = merge();
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let first = r.stderr.lines().next().unwrap_or_default();
    assert!(
        first.contains(s1)
            && first.contains("`runs[0].payload_bytes` makes the shards' sum exceed"),
        "{first}"
    );
    assert!(!out.exists());

    let mut v1 = honest;
    v1["environment"]["hostname"] = serde_json::json!("evil\u{1b}]0;owned\u{7}");
    std::fs::write(&p1, v1.to_string()).unwrap();
    let r = merge();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains('\u{1b}'), "{}", r.stdout);
    assert!(
        r.stdout.contains("evil\\u{1b}]0;owned\\u{7}"),
        "{}",
        r.stdout
    );
}
