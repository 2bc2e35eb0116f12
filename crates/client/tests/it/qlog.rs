//! `--qlog DIR`: one JSON-SEQ qlog per QUIC connection, client and in-process server, in the
//! structure of the qlog main schema (a header record, then events with time, name and
//! data); `--qlog-sample` keeps a share of the connections.

use crate::common;

use std::path::Path;

use common::qbench_plain;
use serde_json::Value;

/// The files in `dir` whose names start with `side`.
fn files(dir: &Path, side: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(side))
        .collect();
    v.sort();
    v
}

/// Checks one JSON-SEQ qlog (RFC 7464 records: RS, JSON, LF); returns its event names.
fn events(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let records: Vec<Value> = bytes
        .split(|&b| b == 0x1e)
        .filter(|r| !r.iter().all(u8::is_ascii_whitespace))
        .map(|r| serde_json::from_slice(r).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect();
    let head = &records[0];
    assert_eq!(head["qlog_format"], "JSON-SEQ", "{}", path.display());
    assert!(head["qlog_version"].is_string());
    assert!(head["trace"]["vantage_point"].is_object(), "{head}");
    records[1..]
        .iter()
        .map(|e| {
            assert!(e["time"].is_number() && e["data"].is_object(), "{e}");
            let name = e["name"].as_str().unwrap().to_string();
            assert!(name.contains(':'), "category:event, {name}");
            name
        })
        .collect()
}

#[test]
fn one_qlog_per_connection_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("qlog");
    let r = qbench_plain(&[
        "--proto",
        "h3",
        "--objects",
        "6x10KB",
        "--connections",
        "3",
        "--qlog",
        q.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let (client, server) = (files(&q, "client-"), files(&q, "server-"));
    assert_eq!(
        (client.len(), server.len()),
        (3, 3),
        "{client:?} {server:?}"
    );
    for f in client.iter().chain(&server) {
        let names = events(f);
        for want in ["transport:packet_sent", "transport:packet_received"] {
            assert!(names.iter().any(|n| n == want), "{}: {want}", f.display());
        }
    }

    let half = dir.path().join("half");
    let r = qbench_plain(&[
        "--proto",
        "h3",
        "--objects",
        "4x1KB",
        "--connections",
        "4",
        "--qlog",
        half.to_str().unwrap(),
        "--qlog-sample",
        "0.5",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(files(&half, "client-").len(), 2);
    assert_eq!(files(&half, "server-").len(), 2);
}

#[test]
fn bad_qlog_flags_are_refused() {
    for (args, flag) in [
        (
            vec!["--proto", "h2", "--qlog", "/tmp/qbench-qlog-h2"],
            "--qlog",
        ),
        (
            vec!["--proto", "h3", "--qlog", "/tmp/q", "--qlog-sample", "1.5"],
            "--qlog-sample",
        ),
        (
            vec!["--proto", "h3", "--qlog-sample", "0.5"],
            "--qlog-sample",
        ),
        (
            vec!["--proto", "h3", "--qlog", "/proc/qbench-qlog"],
            "--qlog",
        ),
        (
            vec!["compare", "--protos", "h2,h3", "--qlog", "/tmp/q"],
            "--qlog",
        ),
    ] {
        let r = qbench_plain(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error:") && first.contains(flag),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert!(
        !Path::new("/tmp/qbench-qlog-h2").exists(),
        "nothing made for refused input"
    );
}
