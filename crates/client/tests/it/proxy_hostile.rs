//! `qbench proxy` against peers that misbehave on purpose, over HTTP/3: an origin whose bodies
//! are not the length it announces, and a client that opens every stream it may and never
//! reads. Loopback only; every wait has a deadline.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::h3peer::{client_config, H3Origin};
use common::needs::{require, Need};
use common::{qbench_within, Served};
use serde_json::Value;

/// The honest answer: a body nobody would mistake for qbench-server's payload pattern.
fn honest_body() -> &'static Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| Bytes::from(common::peers::file_bytes(100_000, 7)))
}

/// `/short` announces 1000 bytes and sends 500, `/long` announces 10 and sends 1000, at once;
/// the `-late` ones send the first part and take a pause before the rest (or the end), so
/// that the head and first bytes have left the proxy when the lie shows. `/ok` tells the
/// truth.
fn lying(path: &str) -> (u64, Vec<Bytes>) {
    let part = |b: u8, n: usize| Bytes::from(vec![b; n]);
    match path {
        "/short" => (1000, vec![part(b's', 500)]),
        "/short-late" => (1000, vec![part(b's', 500), Bytes::new()]),
        "/long" => (10, vec![part(b'l', 1000)]),
        "/long-late" => (10, vec![part(b'l', 10), part(b'l', 990)]),
        "/ok" => (honest_body().len() as u64, vec![honest_body().clone()]),
        _ => (0, Vec::new()),
    }
}

/// The lying paths, and the length each announces.
const LIES: [(&str, usize); 4] = [
    ("/short", 1000),
    ("/short-late", 1000),
    ("/long", 10),
    ("/long-late", 10),
];

fn port_of(served: &Served) -> String {
    served.target.rsplit(':').next().unwrap().to_string()
}

/// What curl got for `path` through the proxy, over `http` (`--http2`, `--http1.1`): its exit
/// code, the status, and the body as written to a file.
fn curl(http: &str, port: &str, ca: &Path, path: &str, out: &Path) -> (i32, String, Vec<u8>) {
    let _ = std::fs::remove_file(out);
    let done = Command::new("curl")
        .args(["-sS", http, "--max-time", "20", "--cacert"])
        .arg(ca)
        .args([
            "--connect-to",
            &format!("localhost:{port}:127.0.0.1:{port}"),
        ])
        .arg("-o")
        .arg(out)
        .args(["-w", "%{http_code}"])
        .arg(format!("https://localhost:{port}{path}"))
        .output()
        .unwrap();
    let body = std::fs::read(out).unwrap_or_default();
    let code = done.status.code().expect("curl exits (--max-time)");
    (
        code,
        String::from_utf8_lossy(&done.stdout).into_owned(),
        body,
    )
}

/// `qbench --proto PROTO --url` for `path` through the proxy: exit code and JSON report.
fn qbench_url(proto: &str, port: &str, ca: &Path, path: &str) -> (Option<i32>, Value, String) {
    let out = qbench_within(
        &[
            "--proto",
            proto,
            "--url",
            &format!("https://localhost:{port}{path}"),
            "--connect-to",
            &format!("127.0.0.1:{port}"),
            "--ca",
            ca.to_str().unwrap(),
            "--json",
            "-",
        ],
        30,
    );
    let json = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    (out.code, json, out.stderr)
}

/// An HTTP/3 origin that announces one length and sends another is never relayed as a whole
/// response: whatever the client's protocol, the client sees its stream reset or its
/// connection cut, and the proxy counts the response broken. That holds too when the excess
/// comes only after every announced byte: curl takes a body as whole once it has the
/// content-length, so those bytes must not reach it before the origin's end. The honest path
/// through the same proxy arrives byte for byte, so the lies are what fails.
#[test]
fn a_lying_h3_origin_is_never_relayed_as_complete() {
    require!(Need::Tool("curl"));
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let origin_ca = dir.path().join("origin.pem");
    let origin = H3Origin::start(&origin_ca, lying);
    let proxy_ca = dir.path().join("proxy.pem");
    let proxy = Served::start_as(
        "proxy",
        &[
            "--upstream",
            &format!("https://localhost:{}", origin.addr.port()),
            "--upstream-ca",
            origin_ca.to_str().unwrap(),
            "--upstream-proto",
            "h3",
        ],
        &proxy_ca,
    );
    let port = port_of(&proxy);
    let file = dir.path().join("body");
    let (mut lies, mut honest) = (0, 0);
    for http in ["--http2", "--http1.1"] {
        let (code, status, body) = curl(http, &port, &proxy_ca, "/ok", &file);
        honest += 1;
        assert_eq!((code, status.as_str()), (0, "200"), "{http} /ok");
        assert!(body == honest_body()[..], "{http} /ok: the body differs");
        for (path, announced) in LIES {
            let (code, status, body) = curl(http, &port, &proxy_ca, path, &file);
            lies += 1;
            // 92: the HTTP/2 stream was reset. HTTP/1.1 has only the connection to cut: 18
            // if it closed after the head, 52 if before it (hyper drops the head it had not
            // yet written when the body fails at once).
            let cut: &[i32] = if http == "--http2" { &[92] } else { &[18, 52] };
            let what = format!(
                "{http} {path}: curl {code}, status {status}, {} bytes",
                body.len()
            );
            assert!(cut.contains(&code), "{what}");
            eprintln!("{what}");
            assert!(body.len() < announced, "{what}");
            if path.ends_with("-late") {
                assert_eq!(status, "200", "the head left before the lie showed: {what}");
            }
        }
    }
    for proto in ["h2", "h3", "h1"] {
        let (code, r, stderr) = qbench_url(proto, &port, &proxy_ca, "/ok");
        honest += 1;
        assert_eq!(code, Some(0), "{proto} /ok: {stderr}");
        assert_eq!(r["runs"][0]["objects"]["completed"], 1, "{proto}: {r}");
        let got = r["runs"][0]["payload_bytes"].as_u64();
        assert_eq!(got, Some(honest_body().len() as u64), "{proto}: {r}");
        for (path, _) in LIES {
            let (code, r, stderr) = qbench_url(proto, &port, &proxy_ca, path);
            lies += 1;
            assert_eq!(code, Some(1), "{proto} {path}: {stderr}");
            let run = &r["runs"][0];
            assert_eq!(run["objects"]["completed"], 0, "{proto} {path}: {r}");
            assert_eq!(run["objects"]["failed"], 1, "{proto} {path}: {r}");
            let errors = run["errors"].as_object().unwrap();
            eprintln!("qbench {proto} {path}: exit {code:?}, errors {errors:?}");
            assert!(
                !errors.is_empty()
                    && errors
                        .keys()
                        .all(|k| ["short_body", "long_body", "reset"].contains(&k.as_str())),
                "{proto} {path}: {errors:?}"
            );
        }
    }
    let (clean, said) = proxy.stop_with_output();
    assert!(clean, "the proxy exits cleanly on SIGTERM: {said}");
    // Every lie is counted broken, and none was answered by the proxy itself.
    assert!(
        said.contains(&format!("relayed {} requests over ", lies + honest)),
        "{said}"
    );
    assert!(said.contains("0 answered 502/504/508"), "{said}");
    assert!(
        said.contains(&format!(
            "{lies} responses broken upstream or of the wrong length"
        )),
        "{said}"
    );
    drop(origin);
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// A qbench-server origin and a proxy in front of it, relaying over `upstream`.
fn chain(dir: &Path, upstream: &str) -> (Served, Served, PathBuf) {
    let origin_cert = dir.join(format!("origin-{upstream}.pem"));
    let origin = Served::start(&[], &origin_cert);
    let proxy_cert = dir.join(format!("proxy-{upstream}.pem"));
    let proxy = Served::start_as(
        "proxy",
        &[
            "--upstream",
            &format!("https://localhost:{}", port_of(&origin)),
            "--upstream-ca",
            origin_cert.to_str().unwrap(),
            "--upstream-proto",
            upstream,
        ],
        &proxy_cert,
    );
    (origin, proxy, proxy_cert)
}

/// The proxy's `--max-streams` (its default): the QUIC stream credit it gives a client.
const STREAMS: usize = 256;

/// What the holding client saw before it stopped reading.
#[derive(Debug, Default)]
struct Held {
    /// Request streams opened (each request sent whole).
    opened: usize,
    /// Response heads within a second of the last request: 200, and any other status.
    ok: usize,
    other: usize,
    /// The 200s whose body began to arrive, and the body bytes taken to see it.
    flowing: usize,
    body_bytes: u64,
    /// UDP payload the client's endpoint took in (acknowledging it) before it stopped.
    udp_rx: u64,
}

/// A QUIC client that offers the largest windows quinn allows (2^62-1 per stream and per
/// connection), opens `STREAMS` requests of 10 GB, takes the heads and first body bytes that
/// come within a second, then stops reading anything at all for `hold`: no packet is
/// received or acknowledged, so what the proxy has sent stays on it. Letting quinn go on
/// acknowledging instead would only move the bodies into this process at loopback speed,
/// windows this large never holding the proxy back. Everything it awaits has a deadline.
fn hold_h3(port: u16, ca: &Path, hold: Duration) -> Result<Held, String> {
    use futures_util::stream::{FuturesUnordered, StreamExt as _};
    use tokio::time::{timeout_at, Instant as At};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let held = rt.block_on(async {
        let deadline = At::now() + Duration::from_secs(20);
        let late = |what: &'static str| move |_| format!("{what}: nothing within 20 s");
        let mut t = quinn::TransportConfig::default();
        t.stream_receive_window(quinn::VarInt::MAX);
        t.receive_window(quinn::VarInt::MAX);
        let ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        let connecting = ep
            .connect_with(client_config(ca, t), addr, "localhost")
            .map_err(|e| e.to_string())?;
        let conn = timeout_at(deadline, connecting)
            .await
            .map_err(late("handshake"))?
            .map_err(|e| e.to_string())?;
        let h3conn = qbench_stack::h3_zero_copy::Connection::new(conn.clone());
        let (mut driver, mut send) = timeout_at(deadline, h3::client::new(h3conn))
            .await
            .map_err(late("h3 setup"))?
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let mut held = Held::default();
        let mut streams = Vec::with_capacity(STREAMS);
        for _ in 0..STREAMS {
            let req = http::Request::get(format!("https://localhost:{port}/bytes/10000000000"))
                .body(())
                .unwrap();
            let opened = async {
                let mut s = send.send_request(req).await?;
                s.finish().await?;
                Ok::<_, h3::error::StreamError>(s)
            };
            let s = timeout_at(deadline, opened)
                .await
                .map_err(late("opening a request stream"))?
                .map_err(|e| e.to_string())?;
            streams.push(s);
            held.opened += 1;
        }
        let soon = At::now() + Duration::from_secs(1);
        let mut ok = Vec::new();
        {
            let mut heads: FuturesUnordered<_> = streams
                .iter_mut()
                .enumerate()
                .map(|(i, s)| async move { (i, s.recv_response().await) })
                .collect();
            while let Ok(Some((i, head))) = timeout_at(soon, heads.next()).await {
                match head.map_err(|e| e.to_string())?.status() {
                    http::StatusCode::OK => ok.push(i),
                    _ => held.other += 1,
                }
            }
        }
        // Not every head: over an HTTP/3 upstream, qbench-server gives its connection's window
        // to the streams already sending before it writes new streams' heads, and most of
        // them wait seconds (the proxy answers 504 at --upstream-timeout).
        held.ok = ok.len();
        let soon = At::now() + Duration::from_secs(1);
        for i in ok {
            let Ok(chunk) = timeout_at(soon, streams[i].recv_data()).await else {
                break;
            };
            if let Some(c) = chunk.map_err(|e| e.to_string())? {
                held.flowing += 1;
                held.body_bytes += bytes::Buf::remaining(&c) as u64;
            }
        }
        held.udp_rx = conn.stats().udp_rx.bytes;
        // Blocks the only thread of this runtime: the endpoint's driver, which reads the
        // socket and acknowledges, does not run until the hold ends.
        std::thread::sleep(hold);
        conn.close(0u32.into(), b"done");
        drop(streams);
        let _ = tokio::time::timeout(Duration::from_secs(1), ep.wait_idle()).await;
        Ok::<_, String>(held)
    })?;
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(held)
}

/// The HTTP/3 counterpart of proxy.rs's never-reading HTTP/2 client: a QUIC client that
/// offers the largest windows, opens 256 streams of 10 GB and stops reading holds the proxy
/// to its bounds (8 MiB of QUIC send window toward the client, 8 MiB of upstream windows)
/// over either upstream.
#[test]
fn an_h3_client_that_never_reads_cannot_make_the_proxy_hold_more_than_its_bounds() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    for upstream in ["h2", "h3"] {
        let (origin, proxy, ca) = chain(dir.path(), upstream);
        let before = proxy.rss_kb();
        let port: u16 = port_of(&proxy).parse().unwrap();
        let client = std::thread::spawn(move || hold_h3(port, &ca, Duration::from_secs(4)));
        // The most the proxy holds, sampled from the connection until the client lets go.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut most = before;
        while !client.is_finished() {
            assert!(Instant::now() < deadline, "{upstream}: the client is stuck");
            std::thread::sleep(Duration::from_millis(100));
            most = most.max(proxy.rss_kb());
        }
        let held = client.join().unwrap();
        let held = held.unwrap_or_else(|e| panic!("{upstream}: {e}"));
        let grew = most.saturating_sub(before);
        eprintln!("{upstream} upstream: the proxy grew by {grew} kB from {before} kB; {held:?}");
        assert_eq!(held.opened, STREAMS, "{upstream}: {held:?}");
        assert!(
            held.ok > 0 && held.flowing > 0 && held.body_bytes > 0,
            "{upstream}: nothing came back: {held:?}"
        );
        assert!(
            grew < 64 * 1024,
            "{upstream}: the proxy grew by {grew} kB while one client held {STREAMS} streams"
        );
        let (clean, said) = proxy.stop_with_output();
        assert!(clean, "{said}");
        // Every stream the client opened became a request upstream, on one connection.
        assert!(
            said.contains(&format!(
                "relayed {STREAMS} requests over 1 upstream connections"
            )),
            "{upstream}: {said}"
        );
        assert!(origin.stop());
    }
    assert!(started.elapsed() < Duration::from_secs(60));
}
