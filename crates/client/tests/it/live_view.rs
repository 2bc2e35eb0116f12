//! The live view of a held load in a real terminal: tmux runs qbench in a pane of its own
//! server, and what the pane shows is read with `capture-pane`, while the load runs and after
//! it, when the terminal must be given back with the summary on it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::needs::{require, Need};
use common::qbench_plain;
use serde_json::Value;

/// A tmux server of the test's own (its socket named for the test), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Runs `shell` in a detached 120x40 session.
    fn run(name: &str, shell: &str) -> Self {
        let t = Self {
            socket: format!("qbench-test-{name}-{}", std::process::id()),
        };
        let ok = t
            .cmd()
            .args(["new-session", "-d", "-x", "120", "-y", "40", shell])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    fn screen(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once it holds `text`, within `secs`.
    fn wait_for(&self, text: &str, secs: u64) -> String {
        self.wait_until(text, secs, |s| s.contains(text))
    }

    /// The screen once `shows` holds for it (`what` names it), within `secs`.
    fn wait_until(&self, what: &str, secs: u64, shows: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if shows(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "no {what:?} on the screen in {secs} s:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn keys(&self, keys: &str) {
        assert!(self
            .cmd()
            .args(["send-keys", keys])
            .status()
            .unwrap()
            .success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// qbench with `args` and its report in `dir`, then its exit status in `dir/status`.
fn shell(dir: &Path, args: &str) -> (String, PathBuf) {
    let json = dir.join("r.json");
    let status = dir.join("status");
    let line = format!(
        "{} {args} --json {}; echo $? > {}; sleep 120",
        env!("CARGO_BIN_EXE_qbench"),
        json.display(),
        status.display()
    );
    (line, status)
}

/// The exit status qbench wrote, within `secs`.
fn status(path: &Path, secs: u64) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.trim().is_empty() {
                return s.trim().parse().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "qbench did not end in {secs} s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_held_load_on_a_terminal_shows_the_live_view_then_gives_the_terminal_back() {
    require!(Need::Tool("tmux"));
    let dir = tempfile::tempdir().unwrap();
    let (line, done) = shell(
        dir.path(),
        "--proto h2 --objects 1x2KB --duration 5s --rate 400",
    );
    let t = Tmux::run("view", &line);
    // No --tui: a held load on a terminal shows the view by itself; the open loop's start
    // lag once the first interval is in.
    let s = t.wait_for("start lag  p50", 30);
    for part in [
        "this run (rate, goodput: last interval)",
        "rate over time",
        "in flight",
        "latency    p50",
        "ttfb       p50",
        "start lag  p50",
        "busiest",
        "errors, this run",
        "latency histogram, this run",
        "run 1/1",
        "q or Ctrl-C stops the load",
    ] {
        assert!(s.contains(part), "no {part:?} on the screen:\n{s}");
    }
    assert_eq!(status(&done, 60), 0, "{}", t.screen());
    // The alternate screen is gone and the summary is on the terminal.
    let s = t.screen();
    assert!(!s.contains("latency over time"), "{s}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let completed = r["runs"][0]["objects"]["completed"].as_u64().unwrap();
    assert!(completed > 0);
    // Of those requested: on a busy machine an open loop may drop one it could not start.
    let requested = r["runs"][0]["objects"]["requested"].as_u64().unwrap();
    let shown = format!("{completed}/{requested} ok").replace(',', "");
    assert!(
        s.replace(',', "").contains(&shown),
        "no {shown:?} in the summary:\n{s}"
    );
}

#[test]
fn q_in_the_live_view_stops_the_load_and_reports_it() {
    require!(Need::Tool("tmux"));
    let dir = tempfile::tempdir().unwrap();
    let (line, done) = shell(
        dir.path(),
        "--tui --proto h3 --objects 1x1KB --duration 60s --connections 2",
    );
    let t = Tmux::run("q", &line);
    t.wait_for("latency over time", 30);
    // The view is up before the first request ends: q once one has, so the report has some.
    t.wait_until("a request ok", 30, |s| {
        s.lines()
            .filter_map(|l| l.split("requests").nth(1))
            .map(str::trim_start)
            .any(|n| n.starts_with(|c: char| c.is_ascii_digit()) && !n.starts_with("0 ok"))
    });
    let asked = Instant::now();
    t.keys("q");
    // A held load stops as at SIGINT: the run ends, its report is written.
    let code = status(&done, 30);
    assert!(asked.elapsed() < Duration::from_secs(30));
    assert_ne!(code, 0);
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let aborted = r["aborted"].as_str().unwrap_or_default();
    assert!(aborted.contains("SIGINT"), "{aborted}");
    assert!(r["runs"][0]["objects"]["completed"].as_u64().unwrap() > 0);
    let s = t.screen();
    assert!(!s.contains("latency over time"), "{s}");
}

#[test]
fn off_a_terminal_tui_prints_lines_and_compare_refuses_it() {
    let r = qbench_plain(&[
        "--tui",
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--duration",
        "2s",
        "--rate",
        "100",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("[run 0"), "{}", r.stderr);
    // Without --tui, a held load off a terminal prints no interval lines.
    let r = qbench_plain(&[
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--duration",
        "1s",
        "--rate",
        "100",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stderr.contains("[run 0"), "{}", r.stderr);
    let r = qbench_plain(&["compare", "--protos", "h2,h3", "--tui"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--tui"), "{}", r.stderr);
    let r = qbench_plain(&["--tui", "--no-tui"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

/// `--tui` on a terminal whose keys do not come to stdin (`< /dev/null`, a pipe): the view
/// could never be stopped by a key, nor closed while it waits for one, so the run prints a
/// line per interval instead, says why, ends when its load does and writes its report.
#[test]
fn tui_without_a_terminal_on_stdin_prints_lines_and_ends() {
    require!(Need::Tool("tmux"));
    for (name, before, after) in [("null", "", " < /dev/null"), ("pipe", "true | ", "")] {
        let dir = tempfile::tempdir().unwrap();
        let args = "--tui --proto h2 --objects 1x1KB --duration 3s --rate 100";
        let (line, done) = shell(dir.path(), &format!("{args}{after}"));
        let line = format!("{before}{line}");
        let t = Tmux::run(&format!("nostdin-{name}"), &line);
        assert_eq!(status(&done, 60), 0, "{name}: {}", t.screen());
        let s = t.screen();
        assert!(s.contains("stdin is not a terminal"), "{name}: {s}");
        assert!(s.contains("[run 0"), "{name}: no interval lines:\n{s}");
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap())
                .unwrap();
        assert!(r["runs"][0]["objects"]["completed"].as_u64().unwrap() > 0);
    }
}

/// A held load shorter than a second with `--tui` (or `--fail-early`) counts its whole length
/// as its interval: no error names `--interval`, which the user never gave.
#[test]
fn a_short_held_load_with_tui_runs_without_naming_interval() {
    let held = ["--proto", "h2", "--objects", "1x1KB", "--rate", "100"];
    for extra in [
        &["--tui"][..],
        &["--fail-if", "errors>0", "--fail-early"][..],
    ] {
        let args = [&held[..], extra, &["--duration", "500ms"]].concat();
        let r = qbench_plain(&args);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("--interval"), "{args:?}: {}", r.stderr);
    }
    let r = qbench_plain(&[&held[..], &["--tui", "--duration", "5ms"]].concat());
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.starts_with("error: --duration: "), "{}", r.stderr);
}
