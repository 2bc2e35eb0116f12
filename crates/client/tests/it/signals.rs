//! A stopping signal at every point of a run's life (connecting, mid-run, between runs, while
//! the report is written) ends in the report with `complete: false` and `aborted` naming it,
//! exit status 1, and nothing left in the report's directory. Each point is reached by waiting
//! for an event qbench shows (a connection accepted, an interval line, a report rewritten, the
//! summary printed), never by a sleep; where the signal lands a little later than the event,
//! the outcome asserted is the same.

use crate::common;

use common::needs::{require, Need};

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use qbench_server::{InProcess, ServerOptions};
use serde_json::Value;

/// Waits for `child`, then checks what a stopped run leaves: status 1 naming the signal, the
/// report with `aborted` starting `interrupted (NAME) ` then `when` (one of), and in `dir` only
/// the files named in `keep`.
fn assert_stopped(out: Output, name: &str, dir: &Path, when: &[&str], keep: &[&str]) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
    assert!(
        stderr.contains(&format!("error: interrupted ({name})")),
        "{stderr}"
    );
    let r: Value = serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap())
        .unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    assert_eq!(r["complete"], false, "{stderr}");
    let why = r["aborted"].as_str().unwrap_or_default();
    let prefix = format!("interrupted ({name}) ");
    assert!(
        when.iter()
            .any(|w| why.starts_with(&format!("{prefix}{w}"))),
        "aborted: {why:?}, expected {prefix} and one of {when:?}"
    );
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, keep, "left in the report's directory");
    r
}

/// SIGINT to `child` mid-run: the report in `dir` names it and holds the run so far,
/// incomplete; `keep` as in `assert_stopped`.
fn interrupt_mid_run(child: Child, dir: &Path, keep: &[&str]) -> Value {
    common::interrupt(&child);
    let out = child.wait_with_output().unwrap();
    let r = assert_stopped(out, "SIGINT", dir, &["during run 0"], keep);
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "the run so far is reported: {r}");
    assert_eq!(runs[0]["complete"], false);
    runs[0].clone()
}

/// Before the first connection: the peer accepts the TCP connection and never answers, so
/// qbench is still connecting when the signal comes; a page's run too, which connects as it
/// goes, and a held load's, which waited out the handshake's timeout.
#[test]
fn a_signal_while_connecting_writes_the_report_with_aborted_set() {
    let peer = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("https://127.0.0.1:{}", peer.local_addr().unwrap().port());
    let page_dir = tempfile::tempdir().unwrap();
    let har = page_dir.path().join("page.har");
    let page = format!(
        r#"{{"log":{{"entries":[{}]}}}}"#,
        page_entry("https://a.test/", 1, 0)
    );
    std::fs::write(&har, page).unwrap();
    let fixed = ["--proto", "h2", "--target", &target, "--insecure"];
    let page = [&fixed[..], &["--page", har.to_str().unwrap()]].concat();
    let held = [&fixed[..], &["--duration", "30s", "--timeout", "60s"]].concat();
    let runs = common::STOPPING.iter().map(|s| (s, &fixed[..]));
    let more = [&page[..], &held[..]].map(|args| (&common::STOPPING[0], args));
    for ((sig, name), args) in runs.chain(more) {
        let dir = tempfile::tempdir().unwrap();
        let child = common::spawn_with_json(args, &dir.path().join("r.json"));
        // Accepted: qbench's TLS handshake now waits for an answer that never comes.
        let (conn, _) = peer.accept().unwrap();
        common::send(&child, *sig);
        let out = child.wait_with_output().unwrap();
        // Connections are made by the run: the handshake is run 0's.
        let when = ["before run 0", "during run 0"];
        let r = assert_stopped(out, name, dir.path(), &when, &["r.json"]);
        drop(conn);
        assert_eq!(
            r["runs"].as_array().unwrap().len(),
            0,
            "a cut run is dropped"
        );
    }
}

/// Mid-run: 100 GB cannot be fetched before the first interval line. A run of fixed objects
/// stops as a held load does: its report has the run so far.
#[test]
fn a_signal_mid_run_writes_the_report_with_aborted_set() {
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("s.jsonl");
    let args = [
        "--proto",
        "h3",
        "--objects",
        "100000x1MB",
        "--interval",
        "100ms",
        "--json-stream",
        stream.to_str().unwrap(),
    ];
    let child = common::spawn_with_json(&args, &dir.path().join("r.json"));
    common::first_line(&stream);
    // The run so far: its requests in flight ended, none started after the signal.
    let run = interrupt_mid_run(child, dir.path(), &["r.json", "s.jsonl"]);
    let objects = &run["objects"];
    let n = |k: &str| objects[k].as_u64().unwrap();
    assert_eq!(n("requested"), 100_000);
    assert!(n("not_started") > 0, "{objects}");
}

/// A page's entry: `url`, `size` bytes, started at `start_ms` and lasting 5 ms (an entry's
/// parent is the one that finished last before it started).
fn page_entry(url: &str, size: u64, start_ms: u64) -> String {
    format!(
        r#"{{"startedDateTime":"2026-11-24T10:00:00.{start_ms:03}Z","time":5,"request":{{"method":"GET","url":"{url}"}},"response":{{"status":200,"bodySize":{size},"content":{{"size":{size}}}}}}}"#
    )
}

/// A page of a root, a `big`-byte object it reveals with one of another origin, and 10 the
/// big one reveals, as a HAR in `dir`.
fn big_page(dir: &Path, big: u64) -> PathBuf {
    let mut entries = vec![
        page_entry("https://a.test/", 1000, 0),
        page_entry("https://b.test/other", 1000, 9),
        page_entry("https://a.test/big", big, 10),
    ];
    entries.extend((0..10).map(|i| page_entry(&format!("https://a.test/{i}.js"), 1000, 20)));
    let har = dir.join("page.har");
    let log = format!(
        r#"{{"log":{{"version":"1.2","entries":[{}]}}}}"#,
        entries.join(",")
    );
    std::fs::write(&har, log).unwrap();
    har
}

/// qbench running `app` over h2 through a forwarder the test owns that carries only the
/// first connection (the others hang in their handshake), once the server has sent 2 MB.
struct MidApp {
    _server: InProcess,
    fwd: common::forward::Forwarder,
    child: Child,
    out: tempfile::TempDir,
}

fn mid_app(app: &[&str], what: &str) -> MidApp {
    let server = InProcess::start(ServerOptions::loopback(), 1).unwrap();
    let port = server.local_addr().port();
    let fwd = common::forward::forward_first(port, None, Duration::ZERO, 1);
    let target = format!("https://127.0.0.1:{}", fwd.port);
    let out = tempfile::tempdir().unwrap();
    let mut args = vec!["--proto", "h2", "--target", &target, "--insecure"];
    args.extend(app.iter().copied());
    let child = common::spawn_with_json(&args, &out.path().join("r.json"));
    wait_for_bytes(&fwd, 2_000_000, what);
    MidApp {
        _server: server,
        fwd,
        child,
        out,
    }
}

/// Waits until the server has sent `n` bytes through `fwd`.
fn wait_for_bytes(fwd: &common::forward::Forwarder, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while fwd.from_server.load(std::sync::atomic::Ordering::Relaxed) < n {
        assert!(Instant::now() < deadline, "{what}: {n} bytes never came");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Mid-page and mid-video: as a run of fixed objects, a page or a video requests nothing more
/// after the signal, lets what is in flight end, and its report has the run so far. The
/// signal comes once the page's big object, or the video's second segment, is on its way.
/// The page's second origin's handshake hangs: the stop abandons it rather than wait for its
/// timeout and count it failed.
#[test]
fn a_signal_mid_page_or_video_reports_the_run_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let har = big_page(dir.path(), 2_000_000_000);
    let page = ["--page", har.to_str().unwrap()];
    let video = ["--video", "5mbit", "--length", "3600s"];
    for (app, what) in [(&page[..], "page"), (&video[..], "video")] {
        let m = mid_app(app, what);
        let run = interrupt_mid_run(m.child, m.out.path(), &["r.json"]);
        assert!(run[what].is_object(), "{what}: {run}");
        let objects = &run["objects"];
        if what == "page" {
            // The last level is never requested, and the big one, in flight at the signal,
            // ends first.
            assert_eq!(objects["requested"], 13, "{what}: {objects}");
            assert_eq!(objects["completed"], 2, "{what}: {objects}");
            assert_eq!(objects["not_started"], 11, "{what}: {objects}");
            // The hung handshake was abandoned, not counted as failed.
            assert_eq!(run["errors"], serde_json::json!({}), "{what}: {run}");
        } else {
            assert!(
                objects["completed"].as_u64().unwrap() >= 2,
                "{what}: {objects}"
            );
        }
        assert_eq!(objects["failed"], 0, "{what}: {objects}");
    }
}

/// A second signal while the first lets the page's big object end: the run in flight is
/// dropped at once, and the report (of no run) is still written, saying when. The object is
/// 8 GB, seconds on loopback, so the second signal lands while it is still on its way
/// however late a loaded machine runs the test.
#[test]
fn a_second_signal_drops_the_run_in_flight_and_still_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let har = big_page(dir.path(), 8_000_000_000);
    let m = mid_app(&["--page", har.to_str().unwrap()], "page");
    common::interrupt(&m.child);
    // The big object still comes after the first signal: the stop is under way.
    let seen = m.fwd.from_server.load(std::sync::atomic::Ordering::Relaxed);
    wait_for_bytes(&m.fwd, seen + 1_000_000, "page");
    common::interrupt(&m.child);
    let out = m.child.wait_with_output().unwrap();
    let r = assert_stopped(out, "SIGINT", m.out.path(), &["during run 0"], &["r.json"]);
    assert_eq!(r["runs"], serde_json::json!([]), "{r}");
}

/// qbench held at its end: `--hgrm` names a FIFO that nobody reads until the signal was
/// sent, and qbench writes it last, waiting for a reader (up to 10 s, or until a signal). So
/// qbench is still there when the signal comes, however fast its runs went.
struct Held {
    fifo: PathBuf,
}

impl Held {
    fn in_dir(dir: &Path) -> Self {
        let fifo = dir.join("h.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        Self { fifo }
    }

    fn args(&self) -> [&str; 2] {
        ["--hgrm", self.fifo.to_str().unwrap()]
    }

    /// Reads the FIFO (once qbench opens it) and waits for qbench to end.
    fn release(self, child: Child) -> Output {
        use std::os::unix::fs::OpenOptionsExt as _;
        let fifo = self.fifo.clone();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::fs::File::open(fifo)?, &mut text);
            std::io::Result::Ok(text)
        });
        let out = child.wait_with_output().unwrap();
        // qbench may have ended without opening it: a writer of ours ends the reader's wait.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !reader.is_finished() && Instant::now() < deadline {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.fifo);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(reader.is_finished(), "the FIFO's reader ended");
        out
    }
}

/// Each stopping signal, sent as the first rewritten report appears: it lands between two
/// runs or in the next one; each is reported, naming it.
#[test]
fn a_stopping_signal_between_runs_writes_the_report_with_aborted_set() {
    let server = InProcess::start(ServerOptions::loopback(), 1).unwrap();
    let target = format!("https://127.0.0.1:{}", server.local_addr().port());
    for ((sig, name), after) in common::STOPPING.into_iter().zip([1u64, 2, 3]) {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let held = Held::in_dir(dir.path());
        let mut args = vec!["--proto", "h2", "--target", &target, "--insecure"];
        args.extend(["--objects", "2x1MB", "--runs", "3"]);
        args.extend(held.args());
        let child = common::spawn_with_json(&args, &json);
        let deadline = Instant::now() + Duration::from_secs(120);
        // The report is rewritten after each run: its run count says how many are done.
        while runs_in(&json) < after {
            assert!(Instant::now() < deadline, "no report with {after} run(s)");
            std::thread::sleep(Duration::from_millis(2));
        }
        common::send(&child, sig);
        let when = [
            "before run ",
            "during run ",
            "after the last run",
            "while the report was written",
        ];
        let out = held.release(child);
        let r = assert_stopped(out, name, dir.path(), &when, &["h.fifo", "r.json"]);
        assert!(r["runs"].as_array().unwrap().len() as u64 >= after);
    }
}

/// The runs in the report at `json` so far (0 before it exists or while it is replaced).
fn runs_in(json: &Path) -> u64 {
    std::fs::read(json)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|r| r["runs"].as_array().map(|a| a.len() as u64))
        .unwrap_or(0)
}

/// A benchmark writing `r.json` in `dir` and its histogram to `held`'s FIFO, sent SIGINT once
/// its summary is printed (in the final write, after the check for a signal after the last
/// run); its output once it ends.
fn interrupted_at_the_summary(dir: &Path, held: Held) -> Output {
    let mut child = common::signalable()
        .args(["--proto", "h2", "--objects", "1x1MB", "--json"])
        .arg(dir.join("r.json"))
        .args(held.args())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = stdout.lines().map_while(Result::ok);
    assert!(lines.any(|l| l.starts_with("qbench h2 ->")), "no summary");
    common::interrupt(&child);
    // The rest of the summary, so that qbench never blocks on a full pipe.
    lines.for_each(drop);
    held.release(child)
}

/// While the outputs are written: the summary is printed, then the report is written and
/// qbench waits for the `--hgrm` FIFO's reader; a signal sent once the summary is out is
/// recorded in the report, rewritten. (The report in the file is no marker: it is rewritten
/// after each run too, before the check for a signal after the last run.)
#[test]
fn a_signal_while_the_outputs_are_written_is_recorded_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let held = Held::in_dir(dir.path());
    let out = interrupted_at_the_summary(dir.path(), held);
    let when = ["while the report was written"];
    let r = assert_stopped(out, "SIGINT", dir.path(), &when, &["h.fifo", "r.json"]);
    assert_eq!(r["runs"].as_array().unwrap().len(), 1, "the run was whole");
}

/// As the summary is printed, just before the report is written: the signal is recorded
/// wherever it lands from there (before, during or after the write, or in the teardown).
#[test]
fn a_signal_as_the_summary_is_printed_is_recorded_in_the_report() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let held = Held::in_dir(dir.path());
        let when = [
            "after the last run",
            "while the report was written",
            "while tearing down",
        ];
        let out = interrupted_at_the_summary(dir.path(), held);
        assert_stopped(out, "SIGINT", dir.path(), &when, &["h.fifo", "r.json"]);
    }
}

/// While the link settles: on a link of an hour's round trip the first echo would take an
/// hour, and SIGINT must not wait for it. The run's link is found by its owner file, which
/// names qbench's pid, so only this run's namespaces are looked at.
#[test]
fn a_signal_while_an_hour_long_link_settles_stops_at_once_and_takes_it_down() {
    require!(Need::Link);
    // A minute, against the hour of one round trip of the link.
    let bound = Duration::from_secs(60);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["--proto", "h2", "--objects", "1x1KB", "--link", "rtt=3600s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let owned_by_child = || -> Option<String> {
        std::fs::read_dir(qbench_shaper::owner::DIR)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|name| {
                let path = Path::new(qbench_shaper::owner::DIR).join(name);
                std::fs::read_to_string(path).is_ok_and(|t| t.trim() == pid)
            })
    };
    let namespaces_of = |owner: &str| -> Vec<String> {
        let prefix = owner.strip_suffix("-link").unwrap_or(owner).to_string() + "-";
        qbench_shaper::netns::list()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect()
    };
    let deadline = Instant::now() + bound;
    let owner = loop {
        if let Some(o) = owned_by_child().filter(|o| namespaces_of(o).len() == 3) {
            break o;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("qbench's link never came up");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    common::interrupt(&child);
    let deadline = Instant::now() + bound;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ended = child.try_wait().unwrap().is_some();
    if !ended {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let left = namespaces_of(&owner);
    for ns in &left {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", ns])
            .status();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        ended,
        "qbench still waited for the link a minute after SIGINT"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("interrupted (SIGINT) while the link was being built"),
        "{stderr}"
    );
    assert!(left.is_empty(), "left {left:?}");
}

/// A held load with one connection up and one whose handshake hangs: the signal ends it at
/// once, the hung handshake abandoned rather than waited for (`--timeout 60s`) and counted
/// failed. Its window, which opens once every connection is up, never opened: it is 0 long,
/// not the 30 s asked for, and what the first connection did is the warm-up's.
#[test]
fn a_signal_with_a_handshake_hanging_ends_a_held_load_at_once() {
    let server = InProcess::start(ServerOptions::loopback(), 1).unwrap();
    let port = server.local_addr().port();
    let fwd = common::forward::forward_first(port, None, Duration::ZERO, 1);
    let target = format!("https://127.0.0.1:{}", fwd.port);
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--proto",
        "h2",
        "--target",
        &target,
        "--insecure",
        "--connections",
        "2",
        "--duration",
        "30s",
        "--timeout",
        "60s",
        "--objects",
        "1KB",
    ];
    let child = common::spawn_with_json(&args, &out.path().join("r.json"));
    wait_for_bytes(&fwd, 1_000_000, "held");
    let run = interrupt_mid_run(child, out.path(), &["r.json"]);
    assert_eq!(run["errors"], serde_json::json!({}), "{run}");
    let load = &run["load"];
    assert_eq!(
        (&load["window_us"], &load["sent"]),
        (&0.into(), &0.into()),
        "{load}"
    );
    assert!(load["warmup_requests"].as_u64().unwrap() > 0, "{load}");
}
