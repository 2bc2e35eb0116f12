//! Interop: qbench against Debian's nginx (HTTP/1.1 and HTTP/2 over TLS 1.3 on loopback),
//! which closes a connection after `keepalive_requests` requests: `Connection: close` on
//! HTTP/1.1, GOAWAY on HTTP/2. Every request completes, byte-exact, on the connections the
//! client opens in their place.

use crate::common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

use common::needs::{require, Need};
use common::peers::{file_bytes, localhost_cert, sha256_hex, which, Peer};
use common::{assert_complete, qbench};
use serde_json::Value;

const BODY: usize = 20_000;

/// The ports of the servers `nginx` runs.
pub(crate) struct Ports {
    /// `keepalive_requests` as asked.
    pub low: u16,
    /// nginx's defaults: 1,000 requests per connection, 128 streams.
    pub default: u16,
    /// `http2_max_concurrent_streams 2`.
    pub narrow: u16,
}

/// nginx in the foreground, one process, everything under `dir`; `limit` is the first
/// server's `keepalive_requests`.
pub(crate) fn nginx(dir: &Path, limit: u32) -> (Peer, Ports) {
    let nginx = which("nginx").unwrap();
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("f.bin"), file_bytes(BODY, 3)).unwrap();
    let (cert, key) = localhost_cert(dir);
    let free = || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (low, default, narrow) = (free(), free(), free());
    let d = dir.display();
    let server = |port: u16, extra: &str| {
        format!(
            "server {{ listen 127.0.0.1:{port} ssl http2; ssl_protocols TLSv1.3; \
             ssl_certificate {c}; ssl_certificate_key {k}; root {d}/www; {extra} }}\n",
            c = cert.display(),
            k = key.display(),
        )
    };
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{ worker_connections 256; }}\n\
             http {{ access_log off; client_body_temp_path {d}/t; proxy_temp_path {d}/t;\n\
             fastcgi_temp_path {d}/t; uwsgi_temp_path {d}/t; scgi_temp_path {d}/t;\n{}{}{}}}\n",
            server(low, &format!("keepalive_requests {limit};")),
            server(default, ""),
            server(narrow, "http2_max_concurrent_streams 2;"),
        ),
    )
    .unwrap();
    let child = Command::new(nginx)
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let peer = Peer::listening(child, "nginx", &[low, default, narrow]);
    let ports = Ports {
        low,
        default,
        narrow,
    };
    (peer, ports)
}

pub(crate) fn run(proto: &str, port: u16, cert: &Path, more: &[&str]) -> common::Run {
    let url = format!("https://localhost:{port}/f.bin");
    let connect = format!("127.0.0.1:{port}");
    let base = [
        "--proto",
        proto,
        "--url",
        &url,
        "--connect-to",
        &connect,
        "--ca",
        cert.to_str().unwrap(),
        "--verify",
    ];
    let r = qbench(&[&base[..], more].concat());
    let digest = &r.json.as_ref().unwrap()["runs"][0]["digests"][&url];
    assert_eq!(
        digest,
        &sha256_hex(&file_bytes(BODY, 3)),
        "{proto} {more:?}"
    );
    r
}

fn reopened(run: &Value) -> usize {
    run["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reopened"] == true)
        .count()
}

#[test]
fn requests_past_nginx_keepalive_requests_go_on_new_connections() {
    require!(Need::Tool("nginx"));
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, Ports { low, default, .. }) = nginx(dir.path(), 10);
    let cert = dir.path().join("cert.pem");

    // The case: nginx's default limit of 1,000 and 1,001 requests.
    for proto in ["h2", "h1"] {
        let r = run(proto, default, &cert, &["--repeat", "1001"]);
        assert_complete(&r, 1, 1001, 1001 * BODY as u64);
        let run0 = &r.json.as_ref().unwrap()["runs"][0];
        assert_eq!(reopened(run0), 1, "{proto}: {run0}");
        assert!(r.stderr.contains("reopened"), "{}", r.stderr);
    }

    // Ten requests per connection, 101 requests: at least ten connections replaced. On h2,
    // the requests above the GOAWAY's last stream went again; none is counted twice.
    for (proto, more) in [
        ("h2", &["--streams", "8"][..]),
        ("h1", &["--connections", "3"][..]),
    ] {
        let args = [&["--repeat", "101"][..], more].concat();
        let r = run(proto, low, &cert, &args);
        assert_complete(&r, 1, 101, 101 * BODY as u64);
        let run0 = &r.json.as_ref().unwrap()["runs"][0];
        let n = reopened(run0);
        assert!(n >= 9, "{proto}: {n} reopened: {run0}");
        let conns = run0["connections"].as_array().unwrap();
        assert!(conns.iter().all(|c| c["error"].is_null()), "{proto}");
        assert!(run0["objects"]["retried"].as_u64().unwrap() >= 1, "{proto}");
    }

    // A held load runs through the limit without an error.
    let r = run("h2", low, &cert, &["--streams", "4", "--duration", "1s"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let run0 = &r.json.as_ref().unwrap()["runs"][0];
    assert_eq!(run0["complete"], true, "{run0}");
    assert!(run0["objects"]["completed"].as_u64().unwrap() > 10);
    assert!(reopened(run0) >= 1);
}

/// nginx allowing 2 streams per connection against 32: among the first requests, sent before
/// its SETTINGS arrive, it turns away those above its limit (REFUSED_STREAM, 28 of them in
/// three runs here). They go again on the same connection, where a new one would meet the
/// same limit before its SETTINGS, and every object arrives whole.
#[test]
fn streams_nginx_turns_away_go_again_on_the_same_connection() {
    require!(Need::Tool("nginx"));
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, ports) = nginx(dir.path(), 10);
    let cert = dir.path().join("cert.pem");
    let r = run(
        "h2",
        ports.narrow,
        &cert,
        &["--repeat", "200", "--streams", "32"],
    );
    assert_complete(&r, 1, 200, 200 * BODY as u64);
    let run0 = &r.json.as_ref().unwrap()["runs"][0];
    assert_eq!(reopened(run0), 0, "{run0}");
    let conns = run0["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{run0}");
    assert_eq!(conns[0]["server_max_streams"], 2, "{run0}");
    assert!(run0["objects"]["retried"].as_u64().unwrap() <= 31, "{run0}");
}
