//! Application workloads end to end on loopback: a video session's segments and bytes, a
//! page recorded by a real browser (Debian's chromium, through Playwright, loading a page
//! that Debian's caddy serves) replayed object for object, and every bad input refused in
//! one line.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::needs::{require, Need};
use serde_json::Value;

fn rejected(args: &[&str], names: &[&str]) {
    let out = common::qbench_plain(args);
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let first = lines.first().copied().unwrap_or_default();
    assert!(first.starts_with("error:"), "{args:?}: {}", out.stderr);
    for n in names {
        assert!(first.contains(n), "{args:?}: should name {n}: {first}");
    }
}

fn temp(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn entry(url: &str, size: &str) -> String {
    format!(
        r#"{{"startedDateTime":"2026-11-24T10:00:00.000Z","time":5,"request":{{"method":"GET","url":"{url}"}},"response":{{"status":200,"bodySize":{size},"content":{{"size":{size}}}}}}}"#
    )
}

fn har(entries: &[String]) -> String {
    format!(
        r#"{{"log":{{"version":"1.2","entries":[{}]}}}}"#,
        entries.join(",")
    )
}

#[test]
fn bad_hars_name_the_file_and_the_entry() {
    let ok = entry("https://a.test/", "10");
    let cases = [
        (
            "truncated.har",
            r#"{"log":{"entries":["#.to_string(),
            vec!["truncated"],
        ),
        ("empty.har", har(&[]), vec!["no entries"]),
        (
            "negative.har",
            har(&[ok.clone(), entry("https://a.test/x.css", "-1")]),
            vec!["entry 1", "negative"],
        ),
        (
            "data.har",
            har(&[ok.clone(), entry("data:image/png;base64,AAAA", "4")]),
            vec!["entry 1", "not http or https"],
        ),
        (
            "missing.har",
            har(&[ok.replace(r#""bodySize":10,"content":{"size":10}"#, r#""content":{}"#)]),
            vec!["entry 0", "missing"],
        ),
        ("notjson.har", "<html>".into(), vec!["not valid JSON"]),
    ];
    for (name, text, words) in cases {
        let (_dir, path) = temp(name, &text);
        let p = path.to_str().unwrap();
        let mut names = vec!["--page", name];
        names.extend(words);
        rejected(&["--page", p], &names);
    }
    rejected(&["--page", "/nonexistent/x.har"], &["--page", "x.har"]);
}

#[test]
fn bad_video_flags_name_the_flag() {
    rejected(&["--video", ""], &["--video", "empty"]);
    rejected(&["--video", "5,1mbit"], &["--video", "lowest first"]);
    rejected(&["--video", "1,2"], &["--video", "unit"]);
    rejected(
        &["--video", "1mbit", "--segment", "90s"],
        &["--segment", "longer than the video"],
    );
    rejected(
        &["--video", "1mbit", "--max-buffer", "1s"],
        &["--max-buffer"],
    );
    rejected(
        &["--video", "1,2mbit", "--video-quality", "3mbit"],
        &["--video-quality"],
    );
    rejected(&["--segment", "1s"], &["--segment", "needs --video"]);
    rejected(
        &["--video", "1mbit", "--watch", "10000000000000000000s"],
        &["--watch", "longer than a day"],
    );
    rejected(&["--video", "1mbit", "--length", "0s"], &["--length"]);
    rejected(&["--video", "50000mbit"], &["--video", "10 GB"]);
    rejected(&["--video", "1mbit", "--interval", "1s"], &["--interval"]);
    rejected(
        &["--video", "1mbit", "--objects", "1x1KB"],
        &["--video", "--objects"],
    );
    rejected(
        &["--video", "1mbit", "--connections", "2"],
        &["--connections"],
    );
    rejected(&["--video", "1mbit", "--duration", "5s"], &["--duration"]);
    rejected(
        &["compare", "--protos", "h2,h3", "--metric", "start"],
        &["--metric", "--video"],
    );
}

/// A 2 s video in 500 ms segments at 1 or 2 Mbit/s: every segment is its bitrate's share.
#[test]
fn a_video_session_fetches_its_segments_byte_exact() {
    for proto in ["h1", "h2", "h3"] {
        let run = common::qbench(&[
            "--proto",
            proto,
            "--video",
            "1,2mbit",
            "--segment",
            "500ms",
            "--length",
            "2s",
            "--start-buffer",
            "500ms",
            "--verify",
        ]);
        assert_eq!(run.code, Some(0), "{proto}: {}", run.stderr);
        let r = run.json.unwrap();
        let rr = &r["runs"][0];
        assert_eq!(rr["complete"], true, "{proto}");
        let v = &rr["video"];
        let segs = v["segments"].as_array().unwrap();
        assert_eq!(segs.len(), 4, "{proto}");
        let mut total = 0;
        for s in segs {
            let rate = s["bitrate_bps"].as_u64().unwrap();
            assert!(rate == 1_000_000 || rate == 2_000_000);
            assert_eq!(s["bytes"].as_u64().unwrap(), rate / 16, "{proto}: {s}");
            total += s["bytes"].as_u64().unwrap();
        }
        assert_eq!(
            segs[0]["bitrate_bps"], 1_000_000,
            "ABR starts at the lowest"
        );
        assert_eq!(rr["payload_bytes"].as_u64().unwrap(), total);
        assert_eq!(rr["objects"]["completed"], 4);
        assert_eq!(v["loaded_us"], 2_000_000);
        assert_eq!(v["played_us"], 2_000_000);
        assert!(v["time_to_start_us"].as_u64().unwrap() > 0);
        assert_eq!(r["config"]["video"]["segment_ms"], 500);
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The HAR's entry count and bytes (content.size), as the recording says.
fn har_totals(path: &Path) -> (u64, u64) {
    let har: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array().unwrap();
    let bytes = entries
        .iter()
        .map(|e| e["response"]["content"]["size"].as_u64().unwrap())
        .sum();
    (entries.len() as u64, bytes)
}

fn replay(har: &Path, expect: (u64, u64)) {
    let (objects, bytes) = expect;
    for proto in ["h1", "h2", "h3"] {
        let run = common::qbench(&[
            "--proto",
            proto,
            "--page",
            har.to_str().unwrap(),
            "--runs",
            "2",
            "--verify",
        ]);
        common::assert_complete(&run, 2, objects, bytes);
        let r = run.json.unwrap();
        for rr in r["runs"].as_array().unwrap() {
            let page = &rr["page"];
            assert_eq!(page["objects"], objects);
            assert_eq!(page["bytes"], bytes);
            let levels = page["levels"].as_array().unwrap();
            assert!(levels.len() >= 2, "{proto}: a page has dependency levels");
            let per_level: u64 = levels.iter().map(|l| l["objects"].as_u64().unwrap()).sum();
            assert_eq!(per_level, objects);
            // A level starts once something of the level before it arrived (a level may
            // end before the one before it: what a fast parent revealed can beat its slow
            // siblings); the page is loaded when its last level-object is.
            let at =
                |k: &str| -> Vec<u64> { levels.iter().map(|l| l[k].as_u64().unwrap()).collect() };
            let (first, done) = (at("first_request_us"), at("done_us"));
            assert!(first.windows(2).all(|w| w[0] <= w[1]), "{proto}: {first:?}");
            assert!(first.iter().zip(&done).all(|(f, d)| f < d), "{proto}");
            assert_eq!(rr["plt_us"].as_u64().unwrap(), *done.iter().max().unwrap());
            // Per origin: a browser's six for HTTP/1.1 (more than one, as the page has
            // objects in parallel), one for HTTP/2 and HTTP/3.
            let conns: Vec<u64> = page["connections"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap())
                .collect();
            assert_eq!(conns.len() as u64, page["origins"].as_u64().unwrap());
            match proto {
                "h1" => {
                    assert!(conns.iter().all(|c| (1..=6).contains(c)), "h1: {conns:?}");
                    assert!(conns.iter().any(|c| *c > 1), "h1: {conns:?}");
                }
                _ => assert!(conns.iter().all(|c| *c == 1), "{proto}: {conns:?}"),
            }
            assert_eq!(
                rr["connections"].as_array().unwrap().len() as u64,
                conns.iter().sum::<u64>()
            );
        }
    }
}

#[test]
fn the_shipped_profiles_replay_object_for_object() {
    let pages = repo().join("scenarios/pages");
    let mut n = 0;
    for e in std::fs::read_dir(&pages).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "har") {
            replay(&path, har_totals(&path));
            n += 1;
        }
    }
    assert!(n >= 2, "scenarios/pages holds the profiles");
}

#[test]
fn a_page_recorded_by_chromium_replays_object_for_object() {
    require!(
        Need::Tool("chromium"),
        Need::PyModule("playwright"),
        Need::Tool("caddy")
    );
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("recorded.har");
    let out = Command::new("python3")
        .arg(repo().join("scripts/tools/record_har.py"))
        .arg(&har)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "recording failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (objects, bytes) = har_totals(&har);
    assert!(objects >= 10, "the test page has a dozen objects");
    replay(&har, (objects, bytes));
}

/// A sweep of video cells: `compare --metric` judges them by a QoE figure, and the report
/// lays them out as Table 6.
#[test]
fn video_cells_are_judged_by_qoe_and_reported_as_table_6() {
    // A sweep sets its network namespace back after each cell: setns, which takes root.
    require!(Need::Root);
    let dir = tempfile::tempdir().unwrap();
    let (_, out, _) = common::sweeps::swept(
        dir.path(),
        "video.toml",
        "# tiny video sweep\nname = \"v\"\n[base]\nprotos = \"h2,h3\"\nrounds = 2\nmetric = \"start\"\n[video]\nbitrates = \"1,2mbit\"\nsegment = \"500ms\"\nlength = \"1s\"\n[axes]\nvideo_quality = [\"1mbit\", \"abr\"]\n",
    );
    let mut cells = 0;
    for e in std::fs::read_dir(&out).unwrap() {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap();
        let r = &v["report"];
        assert_eq!(r["comparison"]["metric"], "start");
        for side in ["a", "b"] {
            for run in r[side]["runs"].as_array().unwrap() {
                assert_eq!(run["video"]["segments"].as_array().unwrap().len(), 2);
            }
        }
        cells += 1;
    }
    assert_eq!(cells, 2);
    let page = dir.path().join("r.html");
    common::sweeps::report(&out, &page);
    let html = std::fs::read_to_string(&page).unwrap();
    let table = html
        .split("Video quality of experience")
        .nth(1)
        .expect("a QoE table");
    assert_eq!(
        table
            .split("</table>")
            .next()
            .unwrap()
            .matches("<tr><td")
            .count(),
        4
    );
}
