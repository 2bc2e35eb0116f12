//! Many small HTTP/2 responses ready at once leave the server in a few writes, not one each;
//! a bulk body still arrives whole; and what is held back does not hold back the server's
//! preface. The server's TCP call tally is process-wide: a test that reads it holds it alone
//! (`tallies_alone`) while the other tests of this binary wait to start their servers.

use crate::common;

use bytes::Bytes;
use common::*;
use futures_util::future::join_all;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use qbench_stack::activity::SERVER_TCP;
use tokio::io::AsyncReadExt;

const REQUESTS: usize = 200;

async fn fetch_all(
    send: &hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    path: &str,
    n: usize,
) -> Vec<usize> {
    join_all((0..n).map(|_| {
        let mut send = send.clone();
        let req = Request::get(format!("https://localhost{path}"))
            .body(Full::default())
            .unwrap();
        async move {
            let resp = send.send_request(req).await.expect("a response");
            assert_eq!(resp.status(), 200);
            let body = resp.into_body().collect().await.expect("a body");
            body.to_bytes().len()
        }
    }))
    .await
}

#[tokio::test]
async fn small_responses_ready_together_are_written_together() {
    let _alone = tallies_alone();
    let s = server(|_| {});
    let io = TokioIo::new(tls(&s, b"h2").await);
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(io)
        .await
        .unwrap();
    tokio::spawn(conn);
    // The connection's first requests, sent while the server's SETTINGS are in flight, go
    // out in a trickle: warm up first.
    assert_eq!(fetch_all(&send, "/bytes/1000", 1).await, vec![1000]);

    let before = SERVER_TCP.snapshot();
    let sizes = tokio::time::timeout(WAIT, fetch_all(&send, "/bytes/1000", REQUESTS))
        .await
        .expect("all answered within the bound");
    assert_eq!(sizes, vec![1000; REQUESTS]);
    // The server counts a write once its syscall has returned, which can be after the client
    // has read the bytes: a busy machine may not have run that step yet.
    let deadline = std::time::Instant::now() + WAIT;
    let mut after = SERVER_TCP.snapshot();
    while after.written_bytes - before.written_bytes < (REQUESTS * 1000) as u64
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        after = SERVER_TCP.snapshot();
    }
    let writes = after.writes - before.writes;
    let bytes = after.written_bytes - before.written_bytes;
    assert!(bytes >= (REQUESTS * 1000) as u64, "{bytes} bytes written");
    // One write per response before the writes were held back to the end of a turn.
    assert!(
        writes <= (REQUESTS / 4) as u64,
        "{writes} writes for {REQUESTS} responses"
    );

    // A body far above the buffer's limit: straight through, every byte, in order.
    let big = 8 * 1024 * 1024;
    let sizes = tokio::time::timeout(WAIT, fetch_all(&send, &format!("/bytes/{big}"), 2))
        .await
        .expect("answered within the bound");
    assert_eq!(sizes, vec![big; 2]);
}

#[tokio::test]
async fn the_servers_settings_do_not_wait_for_the_clients_preface() {
    let s = server(|_| {});
    let mut c = tls(&s, b"h2").await;
    // RFC 9113 3.4: the server's preface is a SETTINGS frame, sent whatever the client does.
    let mut head = [0u8; 9];
    tokio::time::timeout(WAIT, c.read_exact(&mut head))
        .await
        .expect("the server's SETTINGS before the client says anything")
        .unwrap();
    assert_eq!(head[3], 0x4, "frame type of {head:?}");
}
