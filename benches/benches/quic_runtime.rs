//! What a QUIC transfer costs in userspace with quinn's async layer included, in CPU time.
//!
//! `quic_packet` drives quinn-proto's state machines directly. A transfer also runs quinn's
//! endpoint and connection tasks: the endpoint reads a batch and hands each datagram to its
//! connection's task through a channel, the connection driver polls timers and the clock, and
//! streams are woken and read through a shared, locked connection state. This bench runs all of
//! it and charges it no system calls (those are `socket_pipe`'s):
//!
//! - `quic_runtime/transfer/aes256gcm-1452`: a client and a server quinn endpoint on one
//!   current-thread tokio runtime, joined by an in-memory link (`qbench_benches::mem_link`:
//!   GSO batches of 10 handed over whole, as GRO delivers them), packets of 1452 bytes (MTU
//!   discovery off), AES-256-GCM, qbench-server's transport settings on both ends. The server
//!   writes each stream's payload as reference-counted chunks (`write_chunk`, as qbench's h3
//!   does) and the client reads chunks. One iteration is one packet's worth of stream payload
//!   (1411 bytes); the time is the thread's CPU time, so both ends' sealing, opening, ACKs,
//!   tasks, timers and channels, and the link's own work.
//! - `quic_runtime/link/1452`: that link's own work per datagram (a 10-segment batch copied in
//!   on send and out on receive, as the kernel does in a transfer and `socket_pipe` counts),
//!   on the same thread without quinn.
//!
//! `qbench cost` charges `transfer` less `link` less the three `quic_packet` rows to quinn's
//! async layer.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, Criterion, Throughput};
use qbench_benches::mem_link;
use qbench_benches::sys::thread_cpu;
use qbench_benches::tls::{quic_pair, Suite};

/// Stream payload of one full 1452-byte packet (the cost model's QUIC overhead: 41 bytes).
const PAYLOAD_PER_PACKET: u64 = 1452 - 41;
/// The server's write size: qbench-server's body chunk.
const CHUNK: usize = 256 * 1024;

fn transport() -> Arc<quinn::TransportConfig> {
    let mut t = qbench_server::h3srv::transport(&qbench_server::options::ServerOptions::loopback());
    t.initial_mtu(1452);
    t.mtu_discovery_config(None);
    Arc::new(t)
}

/// The server side: every bidirectional stream asks for an 8-byte big-endian length and gets
/// that many bytes.
async fn serve(ep: quinn::Endpoint) {
    let payload = Bytes::from(vec![0x5a; CHUNK]);
    while let Some(incoming) = ep.accept().await {
        let Ok(conn) = incoming.await else { continue };
        let payload = payload.clone();
        tokio::spawn(async move {
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let payload = payload.clone();
                tokio::spawn(async move {
                    let mut len = [0u8; 8];
                    if recv.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut left = u64::from_be_bytes(len);
                    while left > 0 {
                        let n = left.min(CHUNK as u64) as usize;
                        if send.write_chunk(payload.slice(..n)).await.is_err() {
                            return;
                        }
                        left -= n as u64;
                    }
                    let _ = send.finish();
                });
            }
        });
    }
}

/// Fetches `bytes` on a new stream of `conn`; returns what arrived.
async fn fetch(conn: &quinn::Connection, bytes: u64) -> u64 {
    let (mut send, mut recv) = conn.open_bi().await.expect("open stream");
    send.write_all(&bytes.to_be_bytes()).await.expect("request");
    send.finish().expect("finish request");
    let mut got = 0;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.expect("read") {
        got += chunk.bytes.len() as u64;
    }
    got
}

fn transfer(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (mut client_cfg, mut server_cfg) = quic_pair(Suite::Aes256Gcm);
    client_cfg.transport_config(transport());
    server_cfg.transport_config(transport());
    let (a, b) = (
        SocketAddr::from((Ipv4Addr::new(198, 18, 0, 1), 4433)),
        SocketAddr::from((Ipv4Addr::new(198, 18, 0, 2), 50000)),
    );
    let (server_sock, client_sock) = mem_link::pair(a, b);
    let conn = rt.block_on(async {
        let runtime = Arc::new(quinn::TokioRuntime);
        let server = quinn::Endpoint::new_with_abstract_socket(
            quinn::EndpointConfig::default(),
            Some(server_cfg),
            server_sock,
            runtime.clone(),
        )
        .expect("server endpoint");
        tokio::spawn(serve(server));
        let mut client = quinn::Endpoint::new_with_abstract_socket(
            quinn::EndpointConfig::default(),
            None,
            client_sock,
            runtime,
        )
        .expect("client endpoint");
        client.set_default_client_config(client_cfg);
        let conn = client
            .connect(a, "localhost")
            .expect("connect")
            .await
            .expect("handshake over the in-memory link");
        // Congestion window and stream windows open before anything is measured.
        assert_eq!(fetch(&conn, 64 << 20).await, 64 << 20);
        conn
    });

    let mut group = c.benchmark_group("quic_runtime");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20)
        .throughput(Throughput::Bytes(PAYLOAD_PER_PACKET));
    group.bench_function("transfer/aes256gcm-1452", |b| {
        b.iter_custom(|iters| {
            let bytes = iters * PAYLOAD_PER_PACKET;
            let start = thread_cpu();
            let got = rt.block_on(fetch(&conn, bytes));
            let spent = thread_cpu() - start;
            assert_eq!(got, bytes, "short transfer over the in-memory link");
            spent
        })
    });
    group.finish();
    conn.close(0u32.into(), b"done");
}

fn link(c: &mut Criterion) {
    use quinn::udp::{RecvMeta, Transmit};
    use quinn::AsyncUdpSocket;
    use std::io::IoSliceMut;
    use std::task::{Context, Poll, Waker};

    const DATAGRAM: usize = 1452;
    let segments = mem_link::SEGMENTS;
    let (a, b) = (
        SocketAddr::from((Ipv4Addr::new(198, 18, 0, 1), 4433)),
        SocketAddr::from((Ipv4Addr::new(198, 18, 0, 2), 50000)),
    );
    let (tx, rx) = mem_link::pair(a, b);
    let payload = vec![0x5a; segments * DATAGRAM];
    let mut store = vec![0u8; segments * DATAGRAM];
    let mut meta = [RecvMeta::default()];
    let mut cx = Context::from_waker(Waker::noop());
    let mut group = c.benchmark_group("quic_runtime");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .throughput(Throughput::Bytes(DATAGRAM as u64));
    group.bench_function("link/1452", |bench| {
        bench.iter_custom(|iters| {
            let start = thread_cpu();
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(segments);
                let t = Transmit {
                    destination: b,
                    ecn: None,
                    contents: &payload[..n * DATAGRAM],
                    segment_size: Some(DATAGRAM),
                    src_ip: None,
                };
                tx.try_send(&t).expect("in-memory send");
                let mut bufs = [IoSliceMut::new(&mut store)];
                match rx.poll_recv(&mut cx, &mut bufs, &mut meta) {
                    Poll::Ready(Ok(1)) => assert_eq!(meta[0].len, n * DATAGRAM),
                    other => panic!("in-memory receive: {other:?}"),
                }
                left -= n;
            }
            thread_cpu() - start
        })
    });
    group.finish();
}

criterion_group!(benches, transfer, link);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
