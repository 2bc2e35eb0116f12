//! A server with several worker threads receives QUIC on as many sockets of one port (an
//! SO_REUSEPORT group), and a client that moves to a new socket mid-transfer, as behind a NAT
//! that rebinds, keeps its connection: its packets are steered to the endpoint that holds it,
//! whichever socket the kernel's hash of its new address would pick.

use crate::common;

use common::*;

/// Reads an HTTP/3 response stream to its end and returns its DATA frames' payload bytes,
/// telling `each` the count as it grows.
async fn body_bytes(recv: &mut quinn::RecvStream, mut each: impl FnMut(u64)) -> u64 {
    let (mut head, mut body) = (Vec::new(), 0u64);
    // Bytes still to come of the current frame's payload: DATA (counted) or another (skipped).
    let (mut data, mut skip) = (0u64, 0u64);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = tokio::time::timeout(WAIT, recv.read(&mut chunk))
            .await
            .expect("the response moves within the bound")
            .expect("the stream is not reset");
        let Some(n) = n else {
            break;
        };
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let take = if data > 0 { data } else { skip } as usize;
            if take > 0 {
                let k = take.min(rest.len());
                if data > 0 {
                    data -= k as u64;
                    body += k as u64;
                    each(body);
                } else {
                    skip -= k as u64;
                }
                rest = &rest[k..];
                continue;
            }
            head.push(rest[0]);
            rest = &rest[1..];
            if let Some((kind, len)) = frame_head(&head) {
                head.clear();
                if kind == 0 {
                    data = len;
                } else {
                    skip = len;
                }
            }
        }
    }
    assert!(
        head.is_empty() && data == 0 && skip == 0,
        "the stream ends with a whole frame"
    );
    body
}

fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for x in &b[1..len] {
        v = (v << 8) | u64::from(*x);
    }
    Some((v, len))
}

/// A frame's type and length, once `b` holds its whole header.
fn frame_head(b: &[u8]) -> Option<(u64, u64)> {
    let (kind, a) = varint(b)?;
    let (len, _) = varint(&b[a..])?;
    Some((kind, len))
}

#[tokio::test]
async fn a_client_that_rebinds_mid_transfer_completes_against_a_two_socket_server() {
    const SIZE: u64 = 24 << 20;
    const REBINDS: u64 = 8;
    let s = server_on(2, |_| {});
    assert_eq!(s.udp_sockets(), 2, "one socket per worker thread");
    let ep = quic_client(s.cert_pem());
    let conn = quic(&ep, s.local_addr()).await.unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&h3_request(GET, &format!("/bytes/{SIZE}"), 0))
        .await
        .unwrap();
    send.finish().unwrap();
    let mut rebinds = 0;
    let body = body_bytes(&mut recv, |got| {
        // A new socket (a new source port) at each tenth of the body. The kernel hashes each
        // new address to one of the two sockets: without steering, a rebind that lands on the
        // other endpoint loses the connection, which 8 rebinds all but surely do.
        if rebinds < REBINDS && got > (rebinds + 1) * SIZE / (REBINDS + 2) {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            ep.rebind(sock).unwrap();
            rebinds += 1;
        }
    })
    .await;
    assert_eq!(body, SIZE, "every body byte, once");
    assert_eq!(rebinds, REBINDS);
    assert_eq!(conn.close_reason(), None, "the connection is still open");
}

/// Another process of the same user binds a socket with SO_REUSEPORT beside a two-socket
/// server's group. Had the steering program left new connections to the kernel's hash, which
/// picks among every socket on the port, that socket would get about a third of them and their
/// handshakes would never be answered.
#[tokio::test]
async fn a_foreign_reuseport_socket_beside_the_group_gets_no_handshake() {
    const FETCHES: usize = 16;
    const SIZE: u64 = 1000;
    let s = server_on(2, |_| {});
    let foreign = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .unwrap();
    foreign.set_reuse_port(true).unwrap();
    foreign
        .bind(&s.local_addr().into())
        .expect("the same user may join the port");
    let foreign = std::net::UdpSocket::from(foreign);
    foreign.set_nonblocking(true).unwrap();
    let mut fetched = 0;
    for _ in 0..FETCHES {
        // A new endpoint each time: a new source port and a new connection ID.
        let ep = quic_client(s.cert_pem());
        let connecting = ep.connect(s.local_addr(), "localhost").unwrap();
        // A handshake sent to the foreign socket is never answered: not waited for long.
        let Ok(Ok(conn)) =
            tokio::time::timeout(std::time::Duration::from_secs(10), connecting).await
        else {
            continue;
        };
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&h3_request(GET, &format!("/bytes/{SIZE}"), 0))
            .await
            .unwrap();
        send.finish().unwrap();
        if body_bytes(&mut recv, |_| {}).await == SIZE {
            fetched += 1;
        }
    }
    let mut buf = [0u8; 2048];
    let strays = std::iter::from_fn(|| foreign.recv(&mut buf).ok()).count();
    assert_eq!(
        (fetched, strays),
        (FETCHES, 0),
        "fetches that completed, datagrams the foreign socket got"
    );
}

#[test]
fn one_worker_binds_one_socket() {
    let s = server(|_| {});
    assert_eq!(s.udp_sockets(), 1);
    let h2_only = server_on(3, |o| o.protocols = vec![qbench_core::Protocol::H2]);
    assert_eq!(h2_only.udp_sockets(), 0);
}
