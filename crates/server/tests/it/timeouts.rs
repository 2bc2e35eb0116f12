//! Peers that hold the server without finishing anything: each is closed by the bound that
//! applies to it, and the connection cap holds however many there are.

use crate::common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use qbench_server::Stats;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn half_client_hellos_are_closed_at_the_handshake_timeout_and_never_sampled() {
    const N: usize = 50;
    let s = server(|o| o.handshake_timeout = Duration::from_secs(1));
    let mut held = Vec::new();
    for _ in 0..N {
        let mut c = TcpStream::connect(s.local_addr()).await.unwrap();
        c.write_all(HALF_CLIENT_HELLO).await.unwrap();
        held.push(c);
    }
    let stats = s.stats();
    eventually("all accepted", || Stats::get(&stats.accepted) == N as u64).await;
    assert_eq!(
        stats.samplers.load(Ordering::Relaxed),
        0,
        "no handshake, no sampler"
    );
    for c in &mut held {
        let got = read_until_closed(c).await;
        assert!(
            matches!(&got, Ok(b) if b.is_empty()) || got.is_err(),
            "{got:?}"
        );
    }
    eventually("slots freed", || stats.open.load(Ordering::Relaxed) == 0).await;
    assert_eq!(Stats::get(&stats.handshake_timeouts), N as u64);
}

#[tokio::test]
async fn the_connection_cap_refuses_tcp_and_quic_beyond_it_and_frees_slots() {
    let s = server(|o| {
        o.max_connections = 4;
        o.handshake_timeout = Duration::from_secs(60);
    });
    let stats = s.stats();
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = TcpStream::connect(s.local_addr()).await.unwrap();
        c.write_all(HALF_CLIENT_HELLO).await.unwrap();
        held.push(c);
    }
    eventually("four held", || stats.open.load(Ordering::Relaxed) == 4).await;
    let mut fifth = TcpStream::connect(s.local_addr()).await.unwrap();
    let got = read_until_closed(&mut fifth).await;
    assert!(
        matches!(&got, Ok(b) if b.is_empty()) || got.is_err(),
        "{got:?}"
    );
    let ep = quic_client(s.cert_pem());
    let refused = quic(&ep, s.local_addr()).await;
    assert!(
        matches!(refused, Err(quinn::ConnectionError::ConnectionClosed(ref c))
            if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED),
        "{refused:?}"
    );
    assert_eq!(Stats::get(&stats.refused), 2);
    assert_eq!(stats.open.load(Ordering::Relaxed), 4, "the cap held");
    drop(held);
    eventually("slots freed", || stats.open.load(Ordering::Relaxed) == 0).await;
    let conn = quic(&ep, s.local_addr()).await.expect("admitted again");
    conn.close(0u32.into(), b"");
    let _tls = tls(&s, b"h2").await;
}

#[tokio::test]
async fn a_partial_h1_request_is_closed_at_the_header_timeout() {
    let s = server(|o| {
        o.header_timeout = Duration::from_secs(1);
        o.idle_timeout = Duration::from_secs(600);
    });
    let mut c = tls(&s, b"http/1.1").await;
    c.write_all(b"GET /bytes/1 HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    let got = read_until_closed(&mut c).await;
    // hyper closes without an answer (or with a 408); either way the connection ends.
    if let Ok(b) = &got {
        assert!(b.is_empty() || b.starts_with(b"HTTP/1.1 408"), "{b:?}");
    }
}

#[tokio::test]
async fn an_idle_h2_connection_is_closed_at_the_idle_timeout() {
    let s = server(|o| o.idle_timeout = Duration::from_secs(1));
    let mut c = tls(&s, b"h2").await;
    // The preface and an empty SETTINGS frame, then nothing.
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    // Whatever the server sent first (SETTINGS, its ACK, a GOAWAY), the stream ends.
    let _ = read_until_closed(&mut c).await;
    let stats = s.stats();
    eventually("idle close counted", || Stats::get(&stats.idle_closes) == 1).await;
}

#[tokio::test]
async fn an_idle_h3_connection_times_out() {
    let s = server(|o| o.idle_timeout = Duration::from_secs(1));
    let ep = quic_client(s.cert_pem());
    let conn = quic(&ep, s.local_addr()).await.unwrap();
    let why = tokio::time::timeout(WAIT, conn.closed())
        .await
        .expect("closed within the bound");
    assert!(matches!(why, quinn::ConnectionError::TimedOut), "{why:?}");
}
