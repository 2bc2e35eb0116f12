//! `qbench proxy` between qbench (and clients nobody here wrote) and a `qbench serve` origin:
//! every client protocol over either upstream protocol, bodies checked byte for byte, the
//! proxy's own account of what it carried, and its answer when the origin is gone.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::needs::{require, Need};
use common::{assert_complete, qbench, Served};
use qbench_server::standalone::WORKER_NAME;

/// An origin and a proxy in front of it, relaying over `upstream`.
fn chain(dir: &Path, upstream: &str) -> (Served, Served, PathBuf) {
    let origin_cert = dir.join(format!("origin-{upstream}.pem"));
    let origin = Served::start(&[], &origin_cert);
    let port = origin.target.rsplit(':').next().unwrap().to_string();
    let proxy_cert = dir.join(format!("proxy-{upstream}.pem"));
    let proxy = Served::start_as(
        "proxy",
        &[
            "--upstream",
            &format!("https://localhost:{port}"),
            "--upstream-ca",
            origin_cert.to_str().unwrap(),
            "--upstream-proto",
            upstream,
            "--threads",
            "7",
        ],
        &proxy_cert,
    );
    // Seven workers, and at most one thread of tokio's blocking pool (it resolved localhost).
    let named = proxy.threads_named(WORKER_NAME, 7);
    assert!(
        (7..=8).contains(&named),
        "{named} threads named {WORKER_NAME}"
    );
    (origin, proxy, proxy_cert)
}

fn through(proxy: &Served) -> String {
    let port = proxy.target.rsplit(':').next().unwrap();
    format!("https://localhost:{port}")
}

#[test]
fn every_protocol_is_relayed_byte_for_byte_over_either_upstream() {
    let dir = tempfile::tempdir().unwrap();
    for upstream in ["h3", "h2"] {
        let (origin, proxy, ca) = chain(dir.path(), upstream);
        let target = through(&proxy);
        for proto in ["h3", "h2", "h1"] {
            let r = qbench(&[
                "--proto",
                proto,
                "--target",
                &target,
                "--ca",
                ca.to_str().unwrap(),
                "--objects",
                "2x1MB,10x10KB",
                "--connections",
                "2",
                "--verify",
            ]);
            assert_complete(&r, 1, 12, 2_100_000);
        }
        let (clean, said) = proxy.stop_with_output();
        assert!(clean, "the proxy exits cleanly on SIGTERM: {said}");
        // Three runs' bodies, and each run's telemetry answered by the proxy itself.
        assert!(
            said.contains(&format!("{} bytes down (bodies)", 3 * 2_100_000)),
            "{said}"
        );
        assert!(
            said.contains("relayed 36 requests over 6 upstream connections (0 failed"),
            "{said}"
        );
        assert!(origin.stop());
    }
}

#[test]
fn curl_through_the_proxy_gets_the_origins_bytes() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let (origin, proxy, ca) = chain(dir.path(), "h3");
    let fetch = |base: &str, ca: &Path| {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--http2", "--max-time", "30", "--cacert"])
            .arg(ca)
            .arg(format!("{base}/bytes/3000001"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let origin_port = origin.target.rsplit(':').next().unwrap();
    let direct = fetch(
        &format!("https://localhost:{origin_port}"),
        &dir.path().join("origin-h3.pem"),
    );
    let relayed = fetch(&through(&proxy), &ca);
    assert_eq!(relayed.len(), 3_000_001);
    assert!(
        relayed == direct,
        "the relayed body differs from the origin's"
    );
    assert!(proxy.stop());
    assert!(origin.stop());
}

/// quic-go's HTTP/3 client checks every body byte against the payload pattern.
#[test]
fn quic_go_through_the_proxy() {
    require!(Need::Tool("go"));
    let bin = common::go_build("interop/quicgo", "quicgo-proxy");
    let dir = tempfile::tempdir().unwrap();
    let (origin, proxy, ca) = chain(dir.path(), "h2");
    let started = Instant::now();
    let out = Command::new(&bin)
        .arg("-url-base")
        .arg(through(&proxy))
        .arg("-ca")
        .arg(&ca)
        .args(["-size", "1000000", "-fetches", "5", "-concurrent", "10"])
        .args(["-timeout", "20s"])
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(120));
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(summary["errors"], 0, "{summary}");
    assert_eq!(summary["hung"], 0, "{summary}");
    assert_eq!(summary["ok"], 15, "{summary}");
    assert!(proxy.stop());
    assert!(origin.stop());
}

/// With the origin gone, the proxy answers 502 itself: the client counts an HTTP error, and
/// the proxy goes on serving.
#[test]
fn an_unreachable_origin_is_a_502() {
    let dir = tempfile::tempdir().unwrap();
    let (origin, proxy, ca) = chain(dir.path(), "h2");
    assert!(origin.stop());
    let r = qbench(&[
        "--proto",
        "h2",
        "--target",
        &through(&proxy),
        "--ca",
        ca.to_str().unwrap(),
        "--objects",
        "3x10KB",
    ]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("502"), "{}", r.stderr);
    let (clean, said) = proxy.stop_with_output();
    assert!(clean);
    // One connection, three requests: each tried to open the upstream connection anew.
    assert!(
        said.contains("over 3 upstream connections (3 failed to open, 0 opened again"),
        "{said}"
    );
    assert!(
        said.contains("3 answered 502/504/508 by the proxy"),
        "{said}"
    );
}

#[test]
fn bad_proxy_flags() {
    for (args, flag) in [
        (
            &["proxy", "--upstream", "http://localhost:1"][..],
            "--upstream",
        ),
        (
            &["proxy", "--upstream", "https://localhost:1/path"][..],
            "--upstream",
        ),
        (
            &[
                "proxy",
                "--upstream",
                "https://localhost:1",
                "--upstream-proto",
                "h1",
            ][..],
            "--upstream-proto",
        ),
        (
            &[
                "proxy",
                "--upstream",
                "https://localhost:1",
                "--upstream-ca",
                "/nonexistent/ca.pem",
            ][..],
            "--upstream-ca",
        ),
        (&["proxy"][..], "--upstream"),
    ] {
        common::refused(args, flag);
    }
}

/// A certificate and key for `localhost`, so that an origin restarted on the same port is
/// the same origin to the proxy that pins it.
fn identity(dir: &Path) -> (PathBuf, PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("origin.pem"), dir.join("origin.key"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// The origin restarts while a client keeps its connection to the proxy: the proxy opens a
/// new upstream connection for the next request instead of answering 502 for ever.
#[test]
fn a_restarted_origin_is_reached_again_on_the_same_client_connection() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity(dir.path());
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    for upstream in ["h2", "h3"] {
        let origin = Served::start(&["--cert", c, "--key", k], &dir.path().join("unused.pem"));
        let listen = origin.target.trim_start_matches("https://").to_string();
        let port = listen.rsplit(':').next().unwrap().to_string();
        let proxy_cert = dir.path().join(format!("proxy-{upstream}.pem"));
        let proxy = Served::start_as(
            "proxy",
            &[
                "--upstream",
                &format!("https://localhost:{port}"),
                "--upstream-ca",
                c,
                "--upstream-proto",
                upstream,
            ],
            &proxy_cert,
        );
        // Two requests on one connection, 10 s apart; the origin restarts between them: 3 s
        // for the first to be answered and 7 s for the restart, room on a loaded machine.
        let url = format!("{}/bytes/1000", through(&proxy));
        let curl = Command::new("curl")
            .args(["-sS", "--http2", "--rate", "6/m", "--max-time", "40"])
            .args(["-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code}\n"])
            .arg("--cacert")
            .arg(&proxy_cert)
            .args([&url, &url])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        assert!(origin.stop());
        let again = Served::start_at(
            "serve",
            &listen,
            &["--cert", c, "--key", k],
            &dir.path().join("unused.pem"),
        );
        let out = curl.wait_with_output().unwrap();
        let codes = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            codes,
            "200\n200\n",
            "{upstream}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (clean, said) = proxy.stop_with_output();
        assert!(clean);
        assert!(
            said.contains("1 opened again after the last closed"),
            "{said}"
        );
        assert!(again.stop());
    }
}

/// A proxy that would relay to itself is refused at start; a loop of two proxies is cut by
/// the Via each relayed request carries (508 Loop Detected), not run until the connection
/// limit.
#[test]
fn proxy_loops_are_refused_or_cut() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let out = common::qbench_plain(&[
        "proxy",
        "--listen",
        "127.0.0.1:18443",
        "--upstream",
        "https://127.0.0.1:18443",
        "--upstream-insecure",
    ]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.starts_with("error: --upstream"),
        "{}",
        out.stderr
    );
    // A -> B -> A: B listens where A relays, A where B relays.
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (pa, pb) = (free(), free());
    let start = |me: u16, to: u16, name: &str| {
        Served::start_at(
            "proxy",
            &format!("127.0.0.1:{me}"),
            &[
                "--upstream",
                &format!("https://127.0.0.1:{to}"),
                "--upstream-insecure",
                "--upstream-proto",
                "h2",
            ],
            &dir.path().join(name),
        )
    };
    let (a, b) = (start(pa, pb, "a.pem"), start(pb, pa, "b.pem"));
    let out = Command::new("curl")
        .args([
            "-sS",
            "-k",
            "--http2",
            "--max-time",
            "30",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .arg(format!("https://127.0.0.1:{pa}/bytes/10"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "508");
    let (_, said) = a.stop_with_output();
    assert!(said.contains("relayed 2 requests"), "{said}");
    assert!(b.stop());
}

/// An HTTP/2 client that advertises the largest windows, opens 256 streams of 10 GB and never
/// reads holds the proxy to its bounds: 8 MiB from the upstream connection and 8 MiB toward
/// the client (32 KiB per stream), over either upstream. Before the bounds it took 1.02 GB
/// (h2 upstream) and 1.65 GB (h3 upstream: quinn's default connection window is unlimited).
#[test]
fn a_client_that_never_reads_cannot_make_the_proxy_hold_more_than_its_bounds() {
    require!(Need::Tool("python3"));
    let dir = tempfile::tempdir().unwrap();
    for upstream in ["h2", "h3"] {
        let (origin, proxy, _) = chain(dir.path(), upstream);
        let before = proxy.rss_kb();
        let port = proxy.target.rsplit(':').next().unwrap().to_string();
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        let hold = Command::new("python3")
            .arg(scripts.join("tools/proxy_hold.py"))
            .args(["--target", &format!("127.0.0.1:{port}"), "--seconds", "4"])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The most the proxy holds, sampled while the client holds its streams.
        let mut most = 0;
        for _ in 0..30 {
            std::thread::sleep(Duration::from_millis(100));
            most = most.max(proxy.rss_kb());
        }
        let out = hold.wait_with_output().unwrap();
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"streams\": 256"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let grew = most.saturating_sub(before);
        assert!(
            grew < 64 * 1024,
            "{upstream}: the proxy grew by {grew} kB while one client held 256 streams"
        );
        assert!(proxy.stop());
        assert!(origin.stop());
    }
}
