//! `--metrics-listen`: a real Prometheus server, started by the test on loopback, scrapes
//! qbench during a held load, and a PromQL query answers what the report says.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::needs::{require, Need};
use common::qbench_plain;
use serde_json::Value;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `curl -s URL`: its body, `None` when it fails.
fn get(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "5", url])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// qbench held for `duration` at `rate` requests/s with `--metrics-listen 127.0.0.1:0`, once
/// it has said its endpoint's URL: the child, its stderr so far and the URL.
// The child is handed to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
fn serving(duration: &str, rate: &str) -> (Child, String, String) {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args([
            "--proto",
            "h2",
            "--objects",
            "1x1KB",
            "--duration",
            duration,
        ])
        .args(["--rate", rate, "--metrics-listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no URL said:\n{said}");
        }
        said.push_str(&line);
        if let Some(u) = line.trim().strip_prefix("--metrics-listen: serving ") {
            let url = u.to_string();
            // The rest of stderr is read where the test needs it.
            child.stderr = Some(err.into_inner());
            return (child, said, url);
        }
    }
}

/// Prometheus scraping `target` every second, stopped when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: qbench\n    \
                 static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        let p = Self {
            child,
            port,
            _dir: dir,
        };
        // Ready, and its scrape loop has the target (down until qbench listens).
        let deadline = Instant::now() + Duration::from_secs(60);
        let has_target = || {
            get(&format!("http://127.0.0.1:{port}/api/v1/targets"))
                .is_some_and(|t| t.contains(&format!("127.0.0.1:{target}")))
        };
        while !has_target() {
            assert!(
                Instant::now() < deadline,
                "prometheus had no target in 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// The single value of an instant PromQL query.
    fn value(&self, query: &str) -> f64 {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "5", "-G"])
            .arg(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .args(["--data-urlencode", &format!("query={query}")])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).expect("a PromQL answer");
        let result = &v["data"]["result"];
        assert_eq!(result.as_array().map(Vec::len), Some(1), "{query}: {v}");
        result[0]["value"][1].as_str().unwrap().parse().unwrap()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_scrapes_a_held_load_and_holds_the_reports_counts() {
    require!(Need::Tool("prometheus"), Need::Tool("curl"));
    let port = free_port();
    let prom = Prometheus::start(port);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let listen = format!("127.0.0.1:{port}");
    let r = qbench_plain(&[
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--duration",
        "4s",
        "--rate",
        "500",
        "--metrics-listen",
        &listen,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // --interval was not given: nothing printed per interval.
    assert!(!r.stderr.contains("[run 0"), "{}", r.stderr);
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &j["runs"][0];
    let completed = run["objects"]["completed"].as_f64().unwrap();
    assert!(completed > 0.0);
    // qbench waited for a scrape of its final counts: the last sample is the report's.
    let sel = "proto=\"h2\",run=\"0\",shard=\"0/1\"";
    let q = |m: &str| prom.value(&format!("max_over_time({m}{{{sel}}}[10m])"));
    assert_eq!(
        prom.value(&format!(
            "max_over_time(qbench_requests_total{{outcome=\"completed\",{sel}}}[10m])"
        )),
        completed
    );
    assert_eq!(
        q("qbench_payload_bytes_total"),
        run["payload_bytes"].as_f64().unwrap()
    );
    assert_eq!(q("qbench_latency_seconds_count"), completed);
    // Every request that completed had a response head; an open loop records how late each
    // was sent, as the report does (no warm-up here).
    assert_eq!(
        q("qbench_ttfb_seconds_count"),
        run["ttfb"]["count"].as_f64().unwrap()
    );
    assert_eq!(
        q("qbench_start_lag_seconds_count"),
        run["load"]["lag"]["count"].as_f64().unwrap()
    );
    let busy = q("qbench_client_busiest_thread_ratio");
    assert!((0.0..=1.0).contains(&busy), "{busy}");
    // The histogram's buckets hold every request under +Inf and the report's median in the
    // bucket that holds it.
    let inf = prom.value(&format!(
        "max_over_time(qbench_latency_seconds_bucket{{le=\"+Inf\",{sel}}}[10m])"
    ));
    assert_eq!(inf, completed);
    // Samples were taken while the load ran, not only at its end: the final scrape and at
    // least one before it (Prometheus's first scrape lands anywhere in its first interval,
    // and a loaded machine starts it late).
    let samples = prom.value(&format!(
        "count_over_time(qbench_requests_total{{outcome=\"completed\",{sel}}}[10m])"
    ));
    assert!(samples >= 2.0, "{samples} scrapes");
}

#[test]
fn the_endpoint_answers_only_its_path_and_a_taken_port_is_refused() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let r = qbench_plain(&[
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
        "--metrics-listen",
        &addr,
    ]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("--metrics-listen: cannot listen on {addr}")),
        "{}",
        r.stderr
    );
    let r = qbench_plain(&[
        "compare",
        "--protos",
        "h2,h3",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = qbench_plain(&["--metrics-listen", "localhost"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--metrics-listen"), "{}", r.stderr);
}

/// `--metrics-listen 127.0.0.1:0` says the port it took; the endpoint answers HEAD with the
/// GET's head and no body, gives a scraper that does not ask for OpenMetrics (curl's `*/*`)
/// Prometheus's text format, which `promtool check metrics` passes, and OpenMetrics to one
/// that asks; an address that is not loopback is warned about.
#[test]
fn the_endpoint_says_its_port_answers_head_and_follows_accept() {
    require!(Need::Tool("curl"));
    require!(Need::Tool("promtool"));
    // Long enough for two curls and promtool before the run ends on a loaded machine.
    let (mut child, said, url) = serving("10s", "50");
    assert!(!url.ends_with(":0/metrics"), "{url}");
    let curl = |extra: &[&str]| {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "5"])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let head = curl(&["-I"]);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.to_lowercase().contains("content-length:"), "{head}");
    let text = curl(&[]);
    assert!(!text.contains("# EOF"), "{text}");
    assert!(
        text.contains("# TYPE qbench_requests_total counter"),
        "{text}"
    );
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let om = curl(&["-H", "Accept: application/openmetrics-text; version=1.0.0"]);
    assert!(om.ends_with("# EOF\n"), "{om}");
    // It waits for a scrape of the final counts once scraped: scrape until it ends.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "qbench did not end");
        curl(&[]);
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(status.success(), "{said}");

    let r = qbench_plain(
        &["--proto", "h2", "--objects", "1x1KB"]
            .iter()
            .copied()
            .chain(["--metrics-listen", "0.0.0.0:0"])
            .collect::<Vec<_>>(),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: --metrics-listen 0.0.0.0:")
            && r.stderr.contains("not a loopback"),
        "{}",
        r.stderr
    );
}

/// Ctrl-C during the wait for a final scrape ends the wait, as its line says, and nothing
/// else: the run had ended whole, so the report stays complete and the exit status 0.
#[test]
fn ctrl_c_during_the_final_scrape_wait_keeps_the_report_complete() {
    require!(Need::Tool("curl"));
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = common::signalable()
        .args(["--proto", "h2", "--objects", "1x1KB", "--duration", "5s"])
        .args(["--rate", "50", "--metrics-listen", "127.0.0.1:0", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    // Bounded by qbench's own 30 s wait: each line comes or the pipe closes.
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("qbench ended before it waited for a final scrape:\n{said}");
        }
        said.push_str(&line);
        if let Some(u) = line.trim().strip_prefix("--metrics-listen: serving ") {
            // One scrape during the run: a scraper that reads it is waited for at the end.
            let out = Command::new("curl")
                .args(["-s", "--max-time", "5", u])
                .output()
                .unwrap();
            assert!(out.status.success(), "{said}");
        }
        if line.contains("waiting up to") {
            break;
        }
    }
    common::interrupt(&child);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{said}{rest}");
    assert!(
        rest.contains("the wait for a final scrape ended on"),
        "{rest}"
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["complete"], true, "{}", r["aborted"]);
    assert!(r["aborted"].is_null());
}

/// Connections that open and send nothing, as many as the endpoint serves at once and more,
/// cannot keep a scraper out: each newcomer takes the place of the oldest still silent one.
#[test]
fn silent_connections_do_not_keep_a_scraper_out() {
    require!(Need::Tool("curl"));
    let (mut child, _, url) = serving("20s", "20");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    // Twice the bound, each accepted by the kernel and left silent.
    let silent: Vec<std::net::TcpStream> = (0..16)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let got = get(&url);
    let _ = child.kill();
    let _ = child.wait();
    drop(silent);
    let got = got.expect("a scrape answered beside 16 silent connections");
    assert!(got.contains("qbench_requests_total"), "{got}");
}
