//! Helpers shared by the integration tests: run the real binary and read its JSON report.
#![allow(dead_code)]

use assert_cmd::Command;
use qbench_core::LatencyHistogram;
use serde_json::Value;
use std::io::BufRead as _;

pub(crate) mod forward;
pub(crate) mod h3peer;
pub(crate) mod links;
pub(crate) mod needs;
pub(crate) mod peers;
pub(crate) mod sweeps;

pub(crate) struct Run {
    pub code: Option<i32>,
    pub stderr: String,
    pub json: Option<Value>,
}

/// Builds the Go program in `dir` (relative to the workspace) into the test target
/// directory as `name`, and returns its path.
pub(crate) fn go_build(dir: &str, name: &str) -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    let bin = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let out = std::process::Command::new(qbench_testkit::which("go").expect("go on PATH"))
        .current_dir(src)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "go build {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Runs `qbench ARGS --json -` and parses the report, if any.
pub(crate) fn qbench(args: &[&str]) -> Run {
    qbench_env(args, &[])
}

/// `qbench` with these environment variables set.
pub(crate) fn qbench_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Run {
    qbench_report_within(args, env, 120)
}

/// `qbench ARGS --json -`, killed only after `secs`: for a run that ends by its own limits
/// (`--timeout`), a budget above them, so that the outcome is qbench's and not the harness's.
pub(crate) fn qbench_report_within(
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    secs: u64,
) -> Run {
    let out = qbench_within_env(&[args, &["--json", "-"]].concat(), env, secs);
    Run {
        code: out.code,
        stderr: out.stderr,
        json: serde_json::from_str(&out.stdout).ok(),
    }
}

/// Every run fetched `objects` objects and `bytes` payload bytes, and the histograms agree.
pub(crate) fn assert_complete(run: &Run, runs: usize, objects: u64, bytes: u64) {
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let r = run.json.as_ref().expect("JSON report on stdout");
    assert_eq!(r["schema"], "qbench.run-report");
    assert_eq!(r["complete"], true);
    let list = r["runs"].as_array().unwrap();
    assert_eq!(list.len(), runs);
    for rr in list {
        assert_eq!(rr["complete"], true);
        assert_eq!(rr["payload_bytes"], bytes);
        assert_eq!(rr["objects"]["completed"], objects);
        assert_eq!(rr["objects"]["failed"], 0);
        assert_eq!(rr["object_latency"]["count"], objects);
        assert_eq!(rr["ttfb"]["count"], objects);
        let h = LatencyHistogram::decode(rr["object_latency"]["hdr"].as_str().unwrap()).unwrap();
        assert_eq!(h.len(), objects);
        assert!(rr["plt_us"].as_u64().unwrap() > 0);
        assert!(rr["errors"].as_object().unwrap().is_empty());
        let cpu = &rr["cpu"];
        assert!(cpu["client"]["user_s"].as_f64().is_some());
    }
    let s = &r["summary"];
    assert_eq!(s["payload_bytes"], bytes * runs as u64);
    assert_eq!(s["object_latency"]["count"], objects * runs as u64);
}

/// The run failed with exactly one error of `kind`, and still wrote its report.
pub(crate) fn assert_failed_with(run: &Run, kind: &str) {
    assert_eq!(run.code, Some(1), "stderr: {}", run.stderr);
    let r = run
        .json
        .as_ref()
        .expect("partial JSON report still written");
    assert_eq!(r["complete"], false);
    let errors = &r["summary"]["errors"];
    assert!(
        errors[kind].as_u64().unwrap_or(0) >= 1,
        "expected {kind} in {errors}; stderr: {}",
        run.stderr
    );
    let last = run.stderr.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("error: "), "stderr: {}", run.stderr);
    assert!(last.contains(kind), "error line names the kind: {last}");
}

/// What a subcommand printed, for commands without a JSON report on stdout.
pub(crate) struct Captured {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `qbench ARGS` as given, killed after two minutes.
pub(crate) fn qbench_plain(args: &[&str]) -> Captured {
    qbench_within(args, 120)
}

/// Runs `qbench ARGS` as given, killed after `secs` seconds.
pub(crate) fn qbench_within(args: &[&str], secs: u64) -> Captured {
    qbench_within_env(args, &[], secs)
}

/// `qbench_within` with these environment variables set.
pub(crate) fn qbench_within_env(
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    secs: u64,
) -> Captured {
    let started = std::time::SystemTime::now();
    let clock = std::time::Instant::now();
    let out = Command::cargo_bin("qbench")
        .expect("qbench binary built")
        .envs(env.iter().copied())
        .args(args)
        .timeout(std::time::Duration::from_secs(secs))
        .output()
        .expect("qbench runs");
    let captured = Captured {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    keep_samples(args, &captured.stdout, started);
    // Shown with a failure (and always in the kernel VM): where a slow test's time went.
    eprintln!(
        "qbench {} exited {:?} after {:.1} s",
        args.join(" "),
        captured.code,
        clock.elapsed().as_secs_f64()
    );
    captured
}

/// With `QBENCH_REPORT_SAMPLES=DIR` (set by scripts/test.sh), copies every JSON document the
/// command wrote (stdout, `--json`, `--json-stream`, `-o`, `--out`) into DIR, where
/// scripts/ci/validate_reports.py checks them against docs/schema/.
/// Files older than `since` are the test's own (e.g. a cell of an earlier format) and are left.
pub(crate) fn keep_samples(args: &[&str], stdout: &str, since: std::time::SystemTime) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let Some(dir) = std::env::var_os("QBENCH_REPORT_SAMPLES") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let keep = |name: &str, text: &str| {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let file = format!("{}-{n}-{name}", std::process::id());
        std::fs::write(dir.join(file), text).expect("writing a report sample");
    };
    if stdout.trim_start().starts_with('{') {
        let streamed = args.windows(2).any(|w| w == ["--json-stream", "-"]);
        let ext = if streamed { "ndjson" } else { "json" };
        keep(&format!("stdout.{ext}"), stdout);
    }
    for pair in args.windows(2) {
        let (flag, value) = (pair[0], pair[1]);
        if value == "-" || !["--json", "--json-stream", "-o", "--out"].contains(&flag) {
            continue;
        }
        let path = std::path::Path::new(value);
        let mut files = vec![path.to_path_buf()];
        if path.is_dir() {
            // A sweep's --out: its cell files, one level down.
            files = std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
        }
        for f in files {
            let fresh = std::fs::metadata(&f)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since);
            if !fresh {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(&f) {
                let ext = if flag == "--json-stream" {
                    "ndjson"
                } else {
                    "json"
                };
                let stem = f.file_stem().unwrap_or_default().to_string_lossy();
                keep(&format!("{stem}.{ext}"), &text);
            }
        }
    }
}

/// `qbench` to be sent signals: it starts with SIGINT and SIGQUIT at their default actions,
/// as at a terminal, whoever started the tests. A shell starts a background job (`cmd &`)
/// with both ignored, and children inherit that: a SIGINT before qbench installs its
/// handlers would be ignored, and the test would wait for the whole run.
pub(crate) fn signalable() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"));
    at_terminal(&mut cmd);
    cmd
}

/// `cmd` starts with SIGINT and SIGQUIT at their default actions (see `signalable`).
pub(crate) fn at_terminal(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: signal(2) is async-signal-safe, as a pre_exec hook must be.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// Waits (bounded) until `path` holds a whole line, as `--json-stream` writes one per
/// interval: from then on a run is under way.
pub(crate) fn first_line(path: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !std::fs::read(path).is_ok_and(|b| b.contains(&b'\n')) {
        assert!(
            std::time::Instant::now() < deadline,
            "no line in {}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Starts `qbench ARGS --json JSON` in the background, stderr piped (to be interrupted).
#[allow(dead_code)]
pub(crate) fn spawn_with_json(args: &[&str], json: &std::path::Path) -> std::process::Child {
    signalable()
        .args(args)
        .arg("--json")
        .arg(json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("qbench starts")
}

/// Sends SIGINT to `child`, as Ctrl-C would.
#[allow(dead_code)]
pub(crate) fn interrupt(child: &std::process::Child) {
    send(child, libc::SIGINT);
}

/// Sends `sig` to `child`, as Ctrl-C (SIGINT), `timeout` or a scheduler (SIGTERM) or a
/// closed terminal (SIGHUP) would.
#[allow(dead_code)]
pub(crate) fn send(child: &std::process::Child, sig: i32) {
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// The signals that stop qbench cleanly, with the names its messages give them.
#[allow(dead_code)]
pub(crate) const STOPPING: [(i32, &str); 3] = [
    (libc::SIGINT, "SIGINT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGHUP, "SIGHUP"),
];

/// `qbench serve` in its own process, stopped (SIGTERM) however the test ends.
pub(crate) struct Served {
    child: std::process::Child,
    pub target: String,
    /// What the process writes to stderr after its first line, once it ends.
    rest: Option<std::thread::JoinHandle<String>>,
}

impl Served {
    pub(crate) fn start(args: &[&str], cert: &std::path::Path) -> Self {
        Self::start_as("serve", args, cert)
    }

    /// `qbench SUBCOMMAND --listen 127.0.0.1:0 ARGS --cert-out CERT` (serve or proxy), once
    /// it says where it listens.
    pub(crate) fn start_as(sub: &str, args: &[&str], cert: &std::path::Path) -> Self {
        Self::start_at(sub, "127.0.0.1:0", args, cert)
    }

    /// As `start_as`, listening on `listen`.
    pub(crate) fn start_at(sub: &str, listen: &str, args: &[&str], cert: &std::path::Path) -> Self {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
            .args([sub, "--listen", listen])
            .args(args)
            .arg("--cert-out")
            .arg(cert)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let mut words = line.split_whitespace().skip_while(|w| *w != "on");
        let addr = words
            .nth(1)
            .unwrap_or_else(|| panic!("no address in `{line}`"));
        let target = format!("https://{addr}");
        // The server goes on writing (its stats line at the end): keep reading.
        let rest = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
            text
        });
        Self {
            child,
            target,
            rest: Some(rest),
        }
    }

    /// How many of the process's threads carry `name`, once at least `least` do (a new thread
    /// names itself only once it runs: waits at most 5 s) and 200 ms later, to see no more come.
    #[allow(dead_code)]
    pub(crate) fn threads_named(&self, name: &str, least: usize) -> usize {
        let count = || {
            std::fs::read_dir(format!("/proc/{}/task", self.child.id()))
                .expect("the server's threads")
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|comm| comm.trim_end() == name)
                .count()
        };
        for _ in 0..100 {
            if count() >= least {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        count()
    }

    /// The process's resident memory, in kB (VmRSS).
    #[allow(dead_code)]
    pub(crate) fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// Stops the server; true if it exited cleanly.
    pub(crate) fn stop(self) -> bool {
        self.stop_with_output().0
    }

    /// Stops the server (SIGTERM): whether it exited cleanly, and what it wrote last.
    pub(crate) fn stop_with_output(mut self) -> (bool, String) {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let ok = self.child.wait().is_ok_and(|s| s.success());
        let rest = self
            .rest
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        (ok, rest)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `qbench ARGS` exits 2 with an error naming `flag` in its first two lines (clap lists a
/// missing flag on the line after its own), and writes no report.
pub(crate) fn refused(args: &[&str], flag: &str) {
    let out = qbench_plain(args);
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    let head: String = out.stderr.lines().take(2).collect();
    assert!(
        head.starts_with("error:") && head.contains(flag),
        "{args:?}: {}",
        out.stderr
    );
}
