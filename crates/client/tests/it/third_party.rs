//! `--client`: real third-party programs (curl, h2load, ngtcp2, quic-go, Chromium, an `exec:`
//! template) fetch from the in-process server, and their runs come out as run reports with
//! the server's view beside them.

use std::time::{Duration, Instant};

use qbench_testkit::marks::Mark;
use serde_json::Value;

use crate::common;
use common::needs::{require, Need};
use common::{qbench, qbench_plain, Run};

/// The first run of a report.
fn run0(r: &Run) -> &Value {
    &r.json.as_ref().expect("a JSON report")["runs"][0]
}

/// Every object arrived whole, by the client's account and the server's.
fn assert_fetched(r: &Run, client: &str, objects: u64, bytes: u64) {
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let run = run0(r);
    assert_eq!(run["complete"], true, "{}", run["first_error"]);
    assert_eq!(run["objects"]["completed"], objects);
    assert_eq!(run["payload_bytes"], bytes);
    assert_eq!(run["object_latency"]["count"], objects);
    let t = &run["third_party"];
    let name = t["client"].as_str().unwrap();
    assert!(
        name == client || name.starts_with(&format!("{client}:")),
        "{name}"
    );
    for p in t["processes"].as_array().unwrap() {
        assert_eq!(p["exit"], 0, "{p}");
        assert_eq!(p["timed_out"], false);
    }
    let cpu = t["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["user_s"].as_f64().unwrap() + p["sys_s"].as_f64().unwrap())
        .sum::<f64>();
    assert!(cpu > 0.0, "the processes' rusage is read");
    let client_cpu = &run["cpu"]["client"];
    let reported = client_cpu["user_s"].as_f64().unwrap() + client_cpu["sys_s"].as_f64().unwrap();
    assert!(
        (reported - cpu).abs() < 1e-6,
        "the client's CPU is its processes'"
    );
    let sv = &run["server_view"];
    assert_eq!(sv["requests"], objects, "{sv}");
    assert_eq!(sv["complete"], objects);
    assert_eq!(sv["body_bytes"], bytes);
}

/// No process the test started with `mark` (and that inherited it from them) is running.
fn assert_not_running(mark: &Mark) {
    let left = mark.running();
    assert!(left.is_empty(), "left running: {left:?}");
}

/// `run`'s result, and the command line of every process that carried `mark` while it ran
/// (looked at every 20 ms): that the mark reached a client is what makes its absence after
/// the run mean something.
fn marked_while<T: Send>(mark: &Mark, run: impl FnOnce() -> T + Send) -> (T, Vec<String>) {
    std::thread::scope(|s| {
        let running = s.spawn(run);
        let mut seen = std::collections::BTreeSet::new();
        while !running.is_finished() {
            for p in mark.running() {
                // `PID: command line`: the same program under another pid is seen once.
                seen.insert(p.split_once(": ").map_or(p.clone(), |(_, c)| c.to_string()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (running.join().unwrap(), seen.into_iter().collect())
    })
}

/// Nothing was left in `dir` (a TMPDIR the test gave qbench).
fn assert_empty(dir: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

fn verified(r: &Run) -> u64 {
    run0(r)["third_party"]["verified"].as_u64().unwrap()
}

#[test]
fn curl_fetches_over_h1_and_h2_and_its_bodies_are_checked() {
    require!(Need::Tool("curl"));
    for proto in ["h1", "h2"] {
        let r = qbench(&[
            "--client",
            "curl",
            "--proto",
            proto,
            "--objects",
            "3x100KB,1x1MB",
            "--connections",
            "2",
            "--verify",
        ]);
        assert_fetched(&r, "curl", 4, 1_300_000);
        assert_eq!(verified(&r), 4);
        let run = run0(&r);
        assert_eq!(run["third_party"]["timings"], "client");
        assert!(run["third_party"]["version"]
            .as_str()
            .unwrap()
            .starts_with("curl libcurl/"));
        // curl's time_appconnect: one handshake per connection, each process its own.
        assert_eq!(run["connections"].as_array().unwrap().len(), 2);
        assert_eq!(run["ttfb"]["count"], 4);
        assert_eq!(
            run["server_view"]["connections"].as_array().unwrap().len(),
            2
        );
        assert!(run["telemetry"].as_array().is_some_and(|t| t.len() == 2));
        // curl's durations are laid by the server's accept of each connection (its SYN 1.5
        // loopback round trips before it): curl's own start-up is not counted as fetching.
        // Judged by order: the accept comes after curl's connection started and before its
        // TLS handshake ended, which needs the server's reply to a ClientHello sent after the
        // accepted ACK. Laid from the spawn instead, the handshake would end before the accept
        // by curl's start-up less its TLS round trip.
        let mut conns: Vec<(u64, u64)> = run["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let started = c["started_us"].as_u64().unwrap();
                (started, started + c["handshake_us"].as_u64().unwrap())
            })
            .collect();
        conns.sort_unstable();
        let accepts = sorted(
            run["server_view"]["connections"].as_array().unwrap(),
            "accepted_us",
        );
        for ((c, done), s) in conns.iter().zip(&accepts) {
            assert!(
                c <= s && s <= done,
                "curl started {c} us, handshake done {done} us, server accepted {s} us"
            );
        }
    }
}

fn sorted(list: &[Value], key: &str) -> Vec<u64> {
    let mut v: Vec<u64> = list.iter().map(|c| c[key].as_u64().unwrap()).collect();
    v.sort_unstable();
    v
}

#[test]
fn h2load_and_ngtcp2_fetch_with_timings_from_their_logs() {
    require!(Need::Tool("h2load"));
    require!(Need::Tool("gtlsclient"));
    let r = qbench(&[
        "--client",
        "h2load",
        "--proto",
        "h2",
        "--objects",
        "3x100KB,1x1MB",
        "--connections",
        "2",
    ]);
    assert_fetched(&r, "h2load", 4, 1_300_000);
    assert!(run0(&r)["third_party"]["version"]
        .as_str()
        .unwrap()
        .starts_with("h2load nghttp2/"));
    // ngtcp2's example client prints no timings: its qlog gives them, and its downloads are
    // checked byte for byte, the two 100 KB objects of one connection each in its own file.
    let r = qbench(&[
        "--client",
        "ngtcp2",
        "--proto",
        "h3",
        "--objects",
        "3x100KB,1x1MB",
        "--connections",
        "2",
        "--verify",
    ]);
    assert_fetched(&r, "ngtcp2", 4, 1_300_000);
    assert_eq!(verified(&r), 4);
    let run = run0(&r);
    assert_eq!(run["third_party"]["timings"], "client");
    assert!(run["third_party"]["version"]
        .as_str()
        .unwrap()
        .starts_with("ngtcp2-client "));
    let conns = run["server_view"]["connections"].as_array().unwrap();
    assert!(conns.iter().all(|c| c["transport"] == "quic"), "{conns:?}");
}

#[test]
fn quic_go_reports_its_own_timings_on_the_runs_clock() {
    require!(Need::Tool("go"));
    let bin = common::go_build("clients/quicgo", "qbench-quicgo");
    let r = common::qbench_env(
        &[
            "--client",
            "quic-go",
            "--proto",
            "h3",
            "--objects",
            "4x100KB",
            "--verify",
            "--connections",
            "2",
        ],
        &[("QBENCH_QUICGO", bin.as_os_str())],
    );
    assert_fetched(&r, "quic-go", 4, 400_000);
    assert_eq!(verified(&r), 4);
    let run = run0(&r);
    assert!(run["third_party"]["version"]
        .as_str()
        .unwrap()
        .starts_with("quic-go v"));
    // Its connection starts (its own clock, placed by CLOCK_MONOTONIC) precede the server's
    // accepting them, and not by more than the run.
    let mut client: Vec<u64> = run["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["started_us"].as_u64().unwrap())
        .collect();
    let mut server: Vec<u64> = run["server_view"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["accepted_us"].as_u64().unwrap())
        .collect();
    client.sort_unstable();
    server.sort_unstable();
    assert_eq!(client.len(), 2);
    for (c, s) in client.iter().zip(&server) {
        assert!(c <= s && s - c < 1_000_000, "client {c} us, server {s} us");
    }
}

/// The checkout's driver: a built qbench never looks in its source tree for it.
pub(crate) fn chromium_driver() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/chromium/fetch.py")
}

#[test]
fn chromium_fetches_over_h3_on_one_connection_when_asked_to_reuse_it() {
    require!(Need::Tool("chromium"));
    require!(Need::PyModule("playwright"));
    let driver = chromium_driver();
    let mark = Mark::new();
    let env = [("QBENCH_CHROMIUM_DRIVER", driver.as_os_str()), mark.env()];
    let qbench = |args: &[&str]| common::qbench_env(args, &env);
    let (r, seen) = marked_while(&mark, || {
        qbench(&[
            "--client",
            "chromium",
            "--proto",
            "h3",
            "--objects",
            "3x100KB",
            "--verify",
            "--reuse",
        ])
    });
    // The browser's own program, not its driver (`python3 .../chromium/fetch.py`).
    let browser = |c: &String| {
        let program = c.split_whitespace().next().unwrap_or("");
        program.ends_with("/chromium") || program.ends_with("/chrome")
    };
    assert!(
        seen.iter().any(browser),
        "the browser carried the mark: {seen:?}"
    );
    assert_fetched(&r, "chromium", 3, 300_000);
    assert_eq!(verified(&r), 3);
    let run = run0(&r);
    assert_eq!(run["connections"].as_array().unwrap().len(), 1, "reused");
    assert_eq!(
        run["server_view"]["connections"].as_array().unwrap().len(),
        1
    );
    assert!(run["third_party"]["version"]
        .as_str()
        .unwrap()
        .starts_with("Chromium "));
    let r = qbench(&[
        "--client",
        "chromium",
        "--proto",
        "h2",
        "--objects",
        "2x10KB",
    ]);
    assert_fetched(&r, "chromium", 2, 20_000);
    assert_eq!(
        run0(&r)["server_view"]["connections"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "a fresh browser context per load"
    );
    assert_not_running(&mark);
}

#[test]
fn an_exec_template_runs_any_client() {
    require!(Need::Tool("curl"));
    let r = qbench(&[
        "--client",
        "exec:curl -sS --http2 --cacert {ca} -o {out}/body {url}",
        "--proto",
        "h2",
        "--objects",
        "3x50KB",
    ]);
    assert_fetched(&r, "exec", 3, 150_000);
    let run = run0(&r);
    // No fetch lines: the server's times.
    assert_eq!(run["third_party"]["timings"], "server");
    assert_eq!(run["third_party"]["processes"].as_array().unwrap().len(), 3);
}

#[test]
fn a_client_that_hangs_is_killed_at_the_timeout_and_counted() {
    // It makes a temporary directory, as a browser makes its profile, and ignores SIGTERM:
    // the kill gives it no time to clean up, and nothing may be left in TMPDIR.
    let tmp = tempfile::tempdir().unwrap();
    let mark = Mark::new();
    let started = Instant::now();
    let (r, seen) = marked_while(&mark, || {
        common::qbench_env(
            &[
                "--client",
                "exec:sh -c 'trap \"\" TERM; mktemp -d >/dev/null; sleep 60' sh {urls}",
                "--proto",
                "h2",
                "--objects",
                "2x1KB",
                "--timeout",
                "1s",
            ],
            &[("TMPDIR", tmp.path().as_os_str()), mark.env()],
        )
    });
    assert!(seen.iter().any(|c| c == "sleep 60"), "{seen:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_empty(tmp.path());
    common::assert_failed_with(&r, "timeout");
    let run = run0(&r);
    assert_eq!(run["errors"]["timeout"], 2);
    let p = &run["third_party"]["processes"][0];
    assert_eq!(p["timed_out"], true);
    assert_not_running(&mark);
}

/// A signal to qbench mid-run ends its client as the deadline does: SIGTERM, and time to
/// clean up (a browser's driver closes its browser, which writes its profile until then),
/// before SIGKILL; and nothing is left in TMPDIR or running.
#[test]
fn a_signal_to_qbench_gives_its_client_time_to_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let (started, cleaned) = (dir.path().join("started"), dir.path().join("cleaned"));
    let client = format!(
        "exec:sh -c 'trap \"echo > {c}; exit 0\" TERM; mktemp -d >/dev/null; echo > {s}; \
         sleep 67 & wait' sh {{urls}}",
        c = cleaned.display(),
        s = started.display(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let mark = Mark::new();
    let (var, value) = mark.env();
    let mut cmd = common::signalable();
    let child = cmd
        .env(var, value)
        .args(["--client", &client, "--proto", "h2", "--objects", "1x1KB"])
        .args(["--timeout", "60s", "--json"])
        .arg(dir.path().join("r.json"))
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !started.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started.exists(), "the client started");
    // The file is written before the sleep starts: wait (bounded) for it.
    let sleeping = || mark.running().iter().any(|p| p.ends_with(": sleep 67"));
    let until = Instant::now() + Duration::from_secs(30);
    while !sleeping() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sleeping(), "{:?}", mark.running());
    common::send(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cleaned.exists(), "the client had its SIGTERM");
    assert_empty(tmp.path());
    assert_not_running(&mark);

    // Twenty processes that ignore SIGTERM share one grace: qbench is not held 2 s for each.
    let up = dir.path().join("up");
    std::fs::create_dir(&up).unwrap();
    let client = format!(
        "exec:sh -c 'trap \"\" TERM; echo > {u}/$$; sleep 68' sh {{urls}}",
        u = up.display()
    );
    let child = common::signalable()
        .env(var, value)
        .args(["--client", &client, "--proto", "h2", "--objects", "20x1KB"])
        .args(["--connections", "20", "--timeout", "60s", "--json"])
        .arg(dir.path().join("r2.json"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&up).unwrap().count() < 20 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_dir(&up).unwrap().count(), 20, "all started");
    // Each wrote its file before it started its sleep: wait (bounded) for the twenty.
    let sleeping = || {
        mark.running()
            .iter()
            .filter(|p| p.ends_with(": sleep 68"))
            .count()
    };
    let until = Instant::now() + Duration::from_secs(30);
    while sleeping() < 20 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sleeping(), 20, "{:?}", mark.running());
    let signalled = Instant::now();
    common::send(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "one grace, not 20"
    );
    assert_not_running(&mark);
}

/// A client's own CPU is the measurement, not other work on the machine: the noise check
/// takes it out of the machine's busy share, as it does qbench's (a browser's CPU once
/// flagged every run of it as noisy).
#[test]
fn a_clients_cpu_is_not_counted_as_other_work() {
    require!(Need::Tool("curl"));
    let r = qbench(&[
        "--client",
        "exec:sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; \
         exec curl -sS --http2 --cacert \"$0\" -o /dev/null \"$1\"' {ca} {url}",
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
    ]);
    assert_fetched(&r, "exec", 1, 1000);
    let run = run0(&r);
    let n = &run["noise"];
    let (busy, others) = (
        n["busy_pct"].as_f64().unwrap(),
        n["busy_others_pct"].as_f64().unwrap(),
    );
    let ticks = n["ticks"].as_f64().unwrap();
    let c = &run["cpu"]["client"];
    let client_s = c["user_s"].as_f64().unwrap() + c["sys_s"].as_f64().unwrap();
    // SAFETY: a plain sysconf query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let client_pct = client_s * hz / ticks * 100.0;
    assert!(client_s > 0.05, "the client burned {client_s} s of CPU");
    assert!(
        others <= (busy - client_pct).max(0.0) + 0.5,
        "busy {busy}%, the client's share {client_pct}%, other work {others}%"
    );
}

#[test]
fn bad_clients_are_one_line_errors_before_the_first_run() {
    for (args, flag) in [
        (&["--client", "wget"][..], "--client"),
        (&["--client", "exec:fetch {uri}"], "--client"),
        (&["--client", "exec:fetch --ca {ca}"], "--client"),
        (&["--client", "curl", "--proto", "h3"], "--client"),
        (&["--client", "ngtcp2", "--proto", "h2"], "--client"),
        (
            &["--client", "curl", "--proto", "h2", "--duration", "2s"],
            "--duration",
        ),
        (&["--client", "curl", "--proto", "h2", "--reuse"], "--reuse"),
    ] {
        common::refused(args, flag);
    }
    let out = qbench_plain(&[
        "--client",
        "exec:qbench-no-such-client {urls}",
        "--proto",
        "h2",
    ]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stdout.is_empty());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("qbench-no-such-client: not found"),
        "{}",
        lines[0]
    );
    let out = common::qbench_within_env(
        &["--client", "quic-go", "--proto", "h3"],
        &[("QBENCH_QUICGO", "/nonexistent/qbench-quicgo".as_ref())],
        120,
    );
    let err = out.stderr;
    assert_eq!(out.code, Some(1));
    assert!(
        err.contains("qbench-quicgo: not found; build it with"),
        "{err}"
    );
}

#[test]
fn clients_run_inside_the_client_namespace_of_a_link() {
    require!(Need::Link);
    require!(Need::Tool("curl"));
    let r = qbench(&[
        "--client",
        "curl",
        "--proto",
        "h2",
        "--objects",
        "2x20KB",
        "--link",
        "rtt=20ms",
        "--no-calibrate",
    ]);
    assert_fetched(&r, "curl", 2, 40_000);
    let run = run0(&r);
    // TLS 1.3 over TCP takes the server a round trip from accept to done, and the client two
    // (connect, then TLS): the link's delay is in both.
    for c in run["server_view"]["connections"].as_array().unwrap() {
        assert!(c["handshake_us"].as_u64().unwrap() >= 19_000, "{c}");
    }
    for c in run["connections"].as_array().unwrap() {
        assert!(c["handshake_us"].as_u64().unwrap() >= 39_000, "{c}");
    }
    assert!(common::links::ours().is_empty(), "the link is gone");
    // QUIC's server answers at 0.5-RTT, but its handshake completes only with the client's
    // Finished, a round trip after the first Initial.
    require!(Need::Tool("gtlsclient"));
    let r = qbench(&[
        "--client",
        "ngtcp2",
        "--proto",
        "h3",
        "--objects",
        "1x20KB",
        "--link",
        "rtt=20ms",
        "--no-calibrate",
    ]);
    assert_fetched(&r, "ngtcp2", 1, 20_000);
    let run = run0(&r);
    assert_eq!(run["third_party"]["timings"], "client");
    for c in run["server_view"]["connections"].as_array().unwrap() {
        assert!(c["handshake_us"].as_u64().unwrap() >= 19_000, "{c}");
        // Found by its original destination CID in the client's qlog, the connection is
        // placed half the client's first round trip after its first Initial.
        assert!(c["accepted_us"].as_u64().unwrap() >= 9_000, "{c}");
    }
    // By the client's own qlog: its Finished goes out a round trip after its first Initial.
    for c in run["connections"].as_array().unwrap() {
        assert!(c["handshake_us"].as_u64().unwrap() >= 19_000, "{c}");
    }
}
