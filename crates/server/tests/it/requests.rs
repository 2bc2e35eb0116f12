//! Requests a hostile or careless peer sends: oversized heads and bodies, telemetry asked for
//! over and over, and HTTP/3 streams the server stops reading.

use crate::common;

use bytes::Bytes;
use common::*;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use qbench_server::Stats;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_megabyte_header_line_gets_431_not_a_reset() {
    let s = server(|_| {});
    let mut c = tls(&s, b"http/1.1").await;
    let mut req = b"GET /bytes/10 HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
    req.resize(req.len() + 1_000_000, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    // The server reads (and drops) the rest of the request while it closes, so the whole
    // write goes through and the answer arrives.
    c.write_all(&req).await.expect("the server keeps reading");
    let got = read_until_closed(&mut c).await.expect("a clean close");
    assert!(
        got.starts_with(b"HTTP/1.1 431"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
}

async fn h2(
    s: &qbench_server::InProcess,
    stream_window: u32,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let io = TokioIo::new(tls(s, b"h2").await);
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(stream_window)
        .handshake(io)
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

fn get(path: &str) -> Request<Full<Bytes>> {
    Request::get(format!("https://localhost{path}"))
        .body(Full::default())
        .unwrap()
}

#[tokio::test]
async fn telemetry_is_one_body_at_a_time_per_connection() {
    const ASKS: usize = 64;
    let s = server(|_| {});
    // A one-byte window keeps the first body on the server, as a peer that never reads would.
    let mut send = h2(&s, 1).await;
    let mut ok = Vec::new();
    let mut busy = 0;
    let mut pending = Vec::new();
    for _ in 0..ASKS {
        send.ready().await.unwrap();
        pending.push(send.send_request(get("/_qbench/telemetry")));
    }
    for p in pending {
        let resp = tokio::time::timeout(WAIT, p).await.unwrap().unwrap();
        match resp.status() {
            StatusCode::OK => ok.push(resp),
            StatusCode::TOO_MANY_REQUESTS => busy += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(
        (ok.len(), busy),
        (1, ASKS - 1),
        "one body, the rest refused"
    );
    assert_eq!(Stats::get(&s.stats().telemetry_busy), (ASKS - 1) as u64);
    let body = ok
        .pop()
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    let timeline: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(timeline["transport"], "tcp");
    // Once the first body is gone from the server, telemetry is served again (within 20 s:
    // a loaded machine runs the server's task late).
    let mut again = None;
    for _ in 0..2000 {
        let resp = send.send_request(get("/_qbench/telemetry")).await.unwrap();
        if resp.status() == StatusCode::OK {
            again = Some(resp);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        again.is_some(),
        "served again after the first body was read"
    );
}

#[tokio::test]
async fn request_bodies_are_read_and_bounded_before_the_answer() {
    let s = server(|_| {});
    let mut send = h2(&s, 65_535).await;
    let post = |n: usize| {
        Request::builder()
            .method(Method::POST)
            .uri("https://localhost/bytes/10")
            .body(Full::new(Bytes::from(vec![b'x'; n])))
            .unwrap()
    };
    let small = send.send_request(post(10)).await.unwrap();
    assert_eq!(small.status(), StatusCode::METHOD_NOT_ALLOWED);
    let big = send.send_request(post(200_000)).await.unwrap();
    assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let _ = Empty::<Bytes>::new();
    // The connection is still good for GETs.
    let r = send.send_request(get("/bytes/100")).await.unwrap();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), 100);
}

#[tokio::test]
async fn h3_reads_finished_requests_to_the_end_and_stops_long_ones_with_h3_no_error() {
    let s = server(|_| {});
    let ep = quic_client(s.cert_pem());
    let conn = quic(&ep, s.local_addr()).await.unwrap();

    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&h3_request(GET, "/bytes/1000", 0))
        .await
        .unwrap();
    send.finish().unwrap();
    let answer = tokio::time::timeout(WAIT, recv.read_to_end(1 << 20))
        .await
        .unwrap()
        .unwrap();
    assert!(answer.len() > 1000, "headers and 1000 bytes");
    // The request was read to its end: no STOP_SENDING, the stream simply finished.
    let stopped = tokio::time::timeout(WAIT, send.stopped())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stopped, None, "STOP_SENDING on a finished request");

    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    // 200 KB of body, never finished: more than the server reads.
    let _ = send
        .write_all(&h3_request(POST, "/bytes/10", 200_000))
        .await;
    let answer = tokio::time::timeout(WAIT, recv.read_to_end(1 << 20))
        .await
        .unwrap();
    assert!(answer.is_ok(), "answered, then finished: {answer:?}");
    let stopped = tokio::time::timeout(WAIT, send.stopped())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stopped, Some(quinn::VarInt::from_u32(0x100)), "H3_NO_ERROR");
    conn.close(0u32.into(), b"");
}
