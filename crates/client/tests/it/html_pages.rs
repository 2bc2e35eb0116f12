//! `--html` as a reader meets it: the page of a held load and of a comparison, rendered by a
//! real browser (headless chromium, offline: the page needs nothing but itself), holds the
//! charts and sections the report has, with the JSON report's numbers; and the page is written
//! as every output is: never over a device, a link or a directory, refused before the run
//! where it cannot be written, and written for a run that failed too.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::needs::{require, which, Need};
use crate::common::{qbench_plain, qbench_within};

/// What chromium makes of `page`: the DOM after parsing and layout, and a screenshot of it.
/// Each browser has its own profile directory, so that tests running at once do not share one.
fn rendered(page: &Path, shot: &Path) -> String {
    let chromium = which("chromium").expect("required above");
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", page.display());
    let run = |extra: &[String]| {
        let out = assert_cmd::Command::new(&chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(&url)
            .timeout(Duration::from_secs(90))
            .output()
            .expect("chromium runs");
        assert!(
            out.status.success(),
            "chromium: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&[
        format!("--screenshot={}", shot.display()),
        "--window-size=1200,2400".into(),
    ]);
    // A white page of this size compresses to a few kilobytes; tables and charts do not.
    let png = std::fs::metadata(shot).map(|m| m.len()).unwrap_or(0);
    assert!(png > 40_000, "the screenshot is {png} bytes: a blank page?");
    run(&["--dump-dom".into()])
}

/// The cells of the summary row `key`, joined by `|`.
fn row(dom: &str, key: &str) -> String {
    let start = dom
        .find(&format!("<tr data-key=\"{key}\">"))
        .unwrap_or_else(|| panic!("no summary row {key}"));
    let tr = &dom[start..];
    let tr = &tr[..tr.find("</tr>").expect("the row ends")];
    tr.split("<td")
        .skip(2)
        .map(|c| c[c.find('>').expect("a cell") + 1..].trim_end_matches("</td>"))
        .collect::<Vec<_>>()
        .join("|")
}

/// The titles of the page's charts, in order.
fn chart_titles(dom: &str) -> Vec<String> {
    dom.split("font-size=\"15\">")
        .skip(1)
        .filter_map(|s| s.split("</text>").next())
        .map(str::to_string)
        .collect()
}

/// The points of each line drawn in the chart titled `title`.
fn lines(dom: &str, title: &str) -> Vec<usize> {
    let at = dom
        .find(&format!(">{title}</text>"))
        .unwrap_or_else(|| panic!("no chart {title}"));
    let svg = &dom[at..];
    let svg = &svg[..svg.find("</svg>").expect("the chart ends")];
    svg.split("points=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(|p| p.split_whitespace().count())
        .collect()
}

fn ms(us: &Value) -> String {
    format!("{:.2}", us.as_u64().expect("a latency") as f64 / 1000.0)
}

/// Two pages alike byte for byte; where they part, the text around it.
fn same_page(a: &Path, b: &Path) {
    let (a, b) = (
        std::fs::read_to_string(a).unwrap(),
        std::fs::read_to_string(b).unwrap(),
    );
    if let Some(i) = a.bytes().zip(b.bytes()).position(|(x, y)| x != y) {
        let around = |s: &str| {
            s.get(i.saturating_sub(200)..(i + 200).min(s.len()))
                .unwrap_or("")
                .to_string()
        };
        panic!(
            "the pages part at byte {i}:\n{}\n---\n{}",
            around(&a),
            around(&b)
        );
    }
    assert_eq!(a.len(), b.len());
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Runs `qbench ARGS --json --html` in a fresh directory: the directory, the JSON report, the
/// page's path and the page as chromium renders it.
fn page_of(args: &[&str], secs: u64) -> (tempfile::TempDir, Value, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let mut all = args.to_vec();
    all.extend([
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let out = qbench_within(&all, secs);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let dom = rendered(&html, &dir.path().join("r.png"));
    (dir, read_json(&json), html, dom)
}

#[test]
fn a_held_loads_page_shows_its_intervals_and_the_reports_numbers() {
    require!(Need::Tool("chromium"));
    let args = [
        "--proto",
        "h2",
        "--objects",
        "10x5KB",
        "--duration",
        "2s",
        "--interval",
        "500ms",
    ];
    let (dir, r, html, dom) = page_of(&args, 120);
    let s = &r["summary"];
    assert_eq!(row(&dom, "completed"), s["objects_completed"].to_string());
    assert_eq!(row(&dom, "errors"), "0");
    assert_eq!(row(&dom, "runs"), "1 of 1");
    assert_eq!(row(&dom, "latency_p50"), ms(&s["object_latency"]["p50_us"]));
    assert_eq!(row(&dom, "latency_p99"), ms(&s["object_latency"]["p99_us"]));
    assert_eq!(row(&dom, "ttfb_p99"), ms(&s["ttfb"]["p99_us"]));
    let titles = chart_titles(&dom);
    for want in [
        "object latency per interval",
        "completed per interval",
        "object latency CDF",
        "time to first byte CDF",
        "cwnd, first round",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(want)),
            "{want} not in {titles:?}"
        );
    }
    // One point per interval the report holds (each completed objects: a busy loopback).
    let intervals = r["runs"][0]["intervals"].as_array().unwrap();
    let with_latency = intervals
        .iter()
        .filter(|i| i["latency"]["count"].as_u64() > Some(0))
        .count();
    assert!(intervals.len() >= 3, "{intervals:?}");
    let title = titles
        .iter()
        .find(|t| t.starts_with("object latency per interval"))
        .unwrap();
    assert_eq!(lines(&dom, title), [with_latency, with_latency]);
    for id in [
        "summary",
        "over-time",
        "distributions",
        "cwnd",
        "errors",
        "environment",
        "command",
    ] {
        assert!(dom.contains(&format!("id=\"{id}\"")), "no section {id}");
    }
    assert!(dom.contains(
        &r["environment"]["kernel"]
            .as_str()
            .unwrap()
            .replace('&', "&amp;")
    ));
    assert!(!dom.contains("id=\"no-intervals\""));
    // `qbench report` draws a saved report beside it, as FILE.html, and replaces only a page
    // of its own there.
    let saved = dir.path().join("saved.json");
    std::fs::copy(dir.path().join("r.json"), &saved).unwrap();
    let beside = dir.path().join("saved.html");
    std::fs::write(&beside, "mine").unwrap();
    let out = qbench_plain(&["report", saved.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&beside).unwrap(), "mine");
    std::fs::remove_file(&beside).unwrap();
    for _ in 0..2 {
        let out = qbench_plain(&["report", saved.to_str().unwrap()]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    same_page(&beside, &html);
}

#[test]
fn a_comparisons_page_puts_the_sides_side_by_side_under_the_verdict() {
    require!(Need::Tool("chromium"));
    let args = [
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "20x10KB",
        "--rounds",
        "3",
        "--fail-if",
        "b-worse>100000%",
    ];
    let (dir, r, html, dom) = page_of(&args, 180);
    let verdict = r["comparison"]["verdict"].as_str().unwrap();
    assert!(
        dom.contains(&format!("data-verdict=\"{verdict}\"")),
        "verdict {verdict}"
    );
    assert!(dom.contains("<th>A: h2</th><th>B: h3</th>"));
    let both = |side: &str, f: &dyn Fn(&Value) -> String| f(&r[side]["summary"]);
    assert_eq!(
        row(&dom, "completed"),
        format!(
            "{}|{}",
            both("a", &|s| s["objects_completed"].to_string()),
            both("b", &|s| s["objects_completed"].to_string())
        )
    );
    assert_eq!(
        row(&dom, "latency_p99"),
        format!(
            "{}|{}",
            both("a", &|s| ms(&s["object_latency"]["p99_us"])),
            both("b", &|s| ms(&s["object_latency"]["p99_us"]))
        )
    );
    let titles = chart_titles(&dom);
    for want in [
        "PLT per round, h2 vs h3",
        "object latency per round, h2 vs h3",
        "object latency CDF, h2 vs h3",
    ] {
        assert!(titles.iter().any(|t| t == want), "{want} not in {titles:?}");
    }
    // Three rounds a side: a point per round on every line.
    assert_eq!(lines(&dom, "PLT per round, h2 vs h3"), [3, 3]);
    // A comparison records no intervals, and says so.
    assert!(dom.contains("id=\"no-intervals\""));
    assert!(dom.contains("<code>b-worse&gt;100000%</code>"));
    assert!(dom.contains("not met: passes"));
    // The saved report draws the same page.
    let again = dir.path().join("again.html");
    let out = qbench_plain(&[
        "report",
        dir.path().join("r.json").to_str().unwrap(),
        "--html",
        again.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    same_page(&again, &html);
}

/// The page follows `--json`'s rules: a device is written through, a link's target replaced
/// with the link kept, and a directory or a missing one refused before any run (exit 2, one
/// line naming `--html`); `compete` refuses the flag.
#[test]
fn the_page_is_written_as_every_output_is() {
    let dir = tempfile::tempdir().unwrap();
    let small = ["--objects", "5x1KB"];
    let run = |html: &Path| {
        let mut args = small.to_vec();
        args.extend(["--html", html.to_str().unwrap()]);
        qbench_plain(&args)
    };
    let out = run(Path::new("/dev/null"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    use std::os::unix::fs::FileTypeExt;
    let null = std::fs::metadata("/dev/null").unwrap().file_type();
    assert!(null.is_char_device());

    let target = dir.path().join("target.html");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = run(&link);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let page = std::fs::read_to_string(&target).unwrap();
    assert!(page.starts_with("<!doctype html>") && page.contains("id=\"summary\""));

    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    for bad in [sub.clone(), dir.path().join("missing/p.html")] {
        let out = run(&bad);
        assert_eq!(out.code, Some(2), "{}: {}", bad.display(), out.stderr);
        let lines: Vec<&str> = out.stderr.trim_end().lines().collect();
        assert_eq!(lines.len(), 1, "{}", out.stderr);
        assert!(lines[0].contains("--html"), "{}", out.stderr);
    }
    assert!(sub.is_dir() && std::fs::read_dir(&sub).unwrap().next().is_none());

    let page = dir.path().join("f.html");
    let out = qbench_plain(&[
        "compete",
        "--flows",
        "h2:1,h3:1",
        "--objects",
        "5x1KB",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--html"), "{}", out.stderr);
    assert!(!page.exists());
}

/// A run that fails writes its page with its JSON: what it measured and why it stopped.
#[test]
fn a_failed_run_still_writes_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("f.json"), dir.path().join("f.html"));
    // Nothing listens on loopback's port 9 (discard): the connection is refused at once.
    let out = qbench_plain(&[
        "--proto",
        "h2",
        "--url",
        "https://127.0.0.1:9/bytes/10",
        "--timeout",
        "3s",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let r = read_json(&json);
    assert_eq!(r["complete"], false);
    let page = std::fs::read_to_string(&html).expect("the page of the failed run");
    assert!(
        page.contains("id=\"status\" class=\"bad\">Incomplete"),
        "{page}"
    );
    let why = r["aborted"].as_str().expect("why it stopped");
    assert!(
        page.contains(&why.replace('&', "&amp;").replace('<', "&lt;")),
        "{why}"
    );
}

/// A held load stopped by Ctrl-C reports the run so far: its page says why it stopped and
/// draws the intervals it had.
#[test]
fn an_interrupted_held_load_writes_its_page_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let (stream, html) = (dir.path().join("s.jsonl"), dir.path().join("r.html"));
    let args = [
        "--proto",
        "h2",
        "--objects",
        "10x5KB",
        "--duration",
        "60s",
        "--interval",
        "200ms",
        "--json-stream",
        stream.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ];
    let mut child = crate::common::spawn_with_json(&args, &dir.path().join("r.json"));
    crate::common::first_line(&stream);
    crate::common::interrupt(&child);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("qbench did not stop within 60 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1));
    let r = read_json(&dir.path().join("r.json"));
    let why = r["aborted"].as_str().expect("why it stopped");
    assert!(why.starts_with("interrupted (SIGINT)"), "{why}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!(
            "id=\"status\" class=\"bad\">Incomplete: {}",
            why.replace('&', "&amp;")
        )),
        "{why}"
    );
    assert!(page.contains(">object latency per interval, h2"));
    let completed = r["summary"]["objects_completed"].to_string();
    assert!(page.contains(&format!(
        "<td class=\"k\">objects completed</td><td>{completed}</td>"
    )));
}

/// `report` of something that is neither a report nor a sweep's directory (a device, a
/// missing path) is refused naming REPORT, never as a page inside it ("Not a directory").
#[test]
fn report_of_a_device_or_a_missing_path_names_the_report() {
    for (path, want) in [
        ("/dev/zero", "a device or socket"),
        ("/nonexistent/r.json", "No such file"),
    ] {
        let out = qbench_plain(&["report", path]);
        assert_eq!(out.code, Some(2), "{path}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{path}: {}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!("error: REPORT: {path}: "))
                && out.stderr.contains(want),
            "{path}: {}",
            out.stderr
        );
    }
}
