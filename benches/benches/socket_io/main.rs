//! Kernel socket I/O cost per datagram and per byte on loopback (127.0.0.1): UDP through
//! quinn-udp (and raw `sendmmsg`/`recvmsg` for comparison) against TCP.
//!
//! Everything runs on one thread with non-blocking sockets. A cross-thread wakeup costs
//! 25-50 us on the VMs this runs on, which would swamp the 1-10 us a syscall costs, so no
//! benchmark ever waits for another thread. Instead each round goes through two phases:
//! a batch is sent into the receiving socket's queue, then drained from it on the same
//! thread. `iter_custom` times only the phase under test and the other one runs untimed:
//! - `udp_send/*`, `tcp_write/*`: the send calls are timed, the drain is not;
//! - `udp_recv/*`, `tcp_read/*`: the fill is untimed, the receive calls are timed.
//!
//! One iteration is one 1452-byte datagram for UDP (a full QUIC packet at a 1500-byte path
//! MTU) and one 64 KiB `write`/`read` for TCP, so the throughput lines compare directly.
//!
//! Loopback has no device queue to defer to: the send syscall itself carries the packet
//! through IP, the loopback device and the receiving socket's demultiplexing, up to the
//! moment it is queued on the receiver. The send side therefore pays for most of the
//! kernel's work, the receive side only for dequeueing and copying out. The two numbers are
//! not symmetric and only their sum approximates the cost of one datagram (or byte)
//! crossing a real pair of hosts; read `udp_send/X` together with the matching
//! `udp_recv/Y`.
//!
//! - `udp_send/sendmsg`: quinn-udp, one datagram per `sendmsg` (with quinn's ECN cmsg).
//! - `udp_send/sendmmsg`: raw `sendmmsg` of 32 datagrams per call, no cmsgs; quinn-udp
//!   never uses `sendmmsg` on Linux, this shows what batching without GSO would buy.
//! - `udp_send/gso`: quinn-udp with `UDP_SEGMENT`, ten 1452-byte segments per call as quinn
//!   sends them; `udp_send/gso-max` as many as fit in one IPv4 datagram (45; see
//!   [`MAX_UDP_PAYLOAD`]).
//! - `udp_recv/recvmsg`: the minimal receiver, one `recvmsg` per datagram, no cmsgs.
//! - `udp_recv/recvmmsg`: quinn-udp's receive path (`recvmmsg`, 32 messages per call, ECN
//!   and packet-info cmsgs) with GRO turned off.
//! - `udp_recv/gro`, `udp_recv/gro-max`: the same with GRO on and a GSO sender (10 or 45
//!   segments), so each message carries a whole GSO send.
//! - `tcp_write/{16384,65536}`, `tcp_read/{16384,65536}`: a connected loopback pair with
//!   `TCP_NODELAY`, one write or read of that size per iteration (two sizes, so that a call's
//!   fixed cost can be told from its cost per byte).
//!
//! Rounds are deliberately larger than L2 (1440 datagrams, about 3.5 MiB of kernel memory;
//! 4 MiB for TCP), so the drain reads data that has left the writer's private caches, much
//! as it would have after crossing to another core. Rounds that stay in L2 make the receive
//! side look cheaper (about 0.75 us per `recvmsg` with 160-datagram rounds, against 0.9-1.7 us
//! with these, on a 2-vCPU EPYC VM); keep that in mind before shrinking them.
//!
//! In the `udp_send` benchmarks the receiver is a default quinn-udp socket (GRO on), as a
//! QUIC peer would be: that lets a GSO send reach the receive queue as one buffer instead
//! of being split on the sender's syscall. Every drain checks that exactly the number of
//! datagrams or bytes sent arrived, so a full receive buffer panics instead of turning
//! into a silently faster benchmark.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion};
use criterion::{measurement::WallTime, Throughput};
use qbench_benches::sys::{grow_buffers, set_int_opt, wait_readable};

mod tcp;
mod udp;

use tcp::TcpPair;
use udp::{Gso, Receiver, UdpPair};

/// A full-size QUIC datagram at a 1500-byte path MTU over IPv6 (1500 - 40 - 8).
const DATAGRAM: usize = 1452;
/// Messages per `sendmmsg` call and receive buffers per quinn-udp `recv`: quinn-udp's own
/// `BATCH_SIZE` (it hands at most 32 headers to `recvmmsg` on Linux), so both batched paths
/// batch alike.
const MMSG_BATCH: usize = 32;
/// The IPv4 total-length field bounds a whole GSO send, not just each segment: 64 segments of
/// 1452 bytes (quinn-udp's `max_gso_segments()`) fail with EMSGSIZE, which quinn-udp's `send`
/// swallows, so the batch would vanish without an error.
const MAX_UDP_PAYLOAD: usize = 65_535 - 20 - 8;
/// Segments quinn puts in one GSO send (its connection driver's `MAX_TRANSMIT_SEGMENTS`).
const QUINN_GSO_SEGMENTS: usize = 10;

/// Datagrams per round: a multiple of both the 32-message batch and the 45-segment GSO send,
/// and of quinn's 10-segment send, so every round ends on whole batches. About 2 MiB of payload, 3.5 MiB of kernel memory.
const UDP_ROUND: usize = 1440;
/// Kernel memory one queued 1452-byte datagram is charged (skb head plus data), rounded up;
/// only used to shrink rounds when the buffers could not be enlarged.
const UDP_TRUESIZE: usize = 4096;
/// The larger TCP iteration (a 64 KiB application write or read), and what rounds are made of.
const TCP_CHUNK: usize = 65_536;
/// 64 KiB chunks per TCP round (4 MiB), well inside the enlarged buffers and receive window.
const TCP_ROUND: usize = 64;
/// Loopback delivers within the send syscall; anything missing after this long was dropped.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const LOCALHOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// Calls `recv` until it has returned `expected` units in total and returns the time spent in
/// those calls.
///
/// Loopback normally queues a datagram before its send returns, but softirq work can be
/// deferred to ksoftirqd; time spent waiting for such stragglers is taken out.
fn collect(
    fd: RawFd,
    expected: usize,
    what: &str,
    mut recv: impl FnMut() -> io::Result<usize>,
) -> Duration {
    let mut got = 0;
    let mut idle = Duration::ZERO;
    let start = Instant::now();
    while got < expected {
        match recv() {
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let wait = Instant::now();
                if !wait_readable(fd, wait + DRAIN_TIMEOUT) {
                    panic!(
                        "{what}: received {got} of {expected} after {DRAIN_TIMEOUT:?}; \
                         the rest was dropped (receive buffer too small?)"
                    );
                }
                idle += wait.elapsed();
            }
            Err(e) => panic!("{what}: receive failed: {e}"),
        }
    }
    let spent = start.elapsed().saturating_sub(idle);
    assert_eq!(
        got, expected,
        "{what}: received more than was sent in this round"
    );
    spent
}

#[derive(Clone, Copy)]
enum SendMode {
    Sendmsg,
    Sendmmsg,
    Gso(Gso),
}

fn udp_send(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.throughput(Throughput::Bytes(DATAGRAM as u64));
    for (param, mode) in [
        ("sendmsg", SendMode::Sendmsg),
        ("sendmmsg", SendMode::Sendmmsg),
        ("gso", SendMode::Gso(Gso::Quinn)),
        ("gso-max", SendMode::Gso(Gso::Max)),
    ] {
        let mut pair = UdpPair::new(Receiver::QuinnGro(Gso::Quinn));
        let segments = match mode {
            SendMode::Gso(g) => pair.gso_segments(g),
            SendMode::Sendmsg | SendMode::Sendmmsg => 1,
        };
        group.bench_function(BenchmarkId::new("udp_send", param), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(pair.round);
                    let start = Instant::now();
                    match mode {
                        SendMode::Sendmsg => pair.send_sendmsg(n),
                        SendMode::Sendmmsg => pair.send_sendmmsg(n),
                        SendMode::Gso(_) => pair.send_gso(segments, n),
                    }
                    total += start.elapsed();
                    pair.recv_quinn(n, "udp_send drain");
                    left -= n;
                }
                total
            })
        });
        pair.assert_empty();
    }
}

fn udp_recv(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.throughput(Throughput::Bytes(DATAGRAM as u64));
    for (param, receiver) in [
        ("recvmsg", Receiver::Plain),
        ("recvmmsg", Receiver::Quinn),
        ("gro", Receiver::QuinnGro(Gso::Quinn)),
        ("gro-max", Receiver::QuinnGro(Gso::Max)),
    ] {
        let mut pair = UdpPair::new(receiver);
        let segments = match receiver {
            Receiver::QuinnGro(g) => pair.gso_segments(g),
            Receiver::Plain | Receiver::Quinn => 1,
        };
        let what = format!("udp_recv/{param}");
        group.bench_function(BenchmarkId::new("udp_recv", param), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(pair.round);
                    total += match receiver {
                        Receiver::Plain => {
                            pair.send_sendmmsg(n);
                            pair.recv_plain(n, &what)
                        }
                        Receiver::Quinn => {
                            pair.send_sendmmsg(n);
                            pair.recv_quinn(n, &what)
                        }
                        // Coalescing on loopback happens only for GSO sends; there is no
                        // NAPI GRO on the loopback device.
                        Receiver::QuinnGro(_) => {
                            pair.send_gso(segments, n);
                            pair.recv_quinn(n, &what)
                        }
                    };
                    left -= n;
                }
                total
            })
        });
        pair.assert_empty();
    }
}

fn tcp(group: &mut BenchmarkGroup<'_, WallTime>) {
    // Two sizes, so that a call's fixed cost can be told from its cost per byte.
    for size in [TCP_CHUNK / 4, TCP_CHUNK] {
        tcp_size(group, size);
    }
}

/// One `size`-byte write or read per iteration; rounds stay whole 64 KiB chunks on the wire.
fn tcp_size(group: &mut BenchmarkGroup<'_, WallTime>, size: usize) {
    group.throughput(Throughput::Bytes(size as u64));
    let param = size.to_string();
    let per_chunk = TCP_CHUNK / size;

    let mut pair = TcpPair::new();
    group.bench_function(BenchmarkId::new("tcp_write", &param), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(TCP_ROUND * per_chunk);
                let start = Instant::now();
                pair.write_round_of(n, size);
                total += start.elapsed();
                pair.read_exact(n * size, pair.sink.len(), "tcp_write drain");
                left -= n;
            }
            total
        })
    });
    pair.assert_empty();

    let mut pair = TcpPair::new();
    group.bench_function(BenchmarkId::new("tcp_read", &param), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(TCP_ROUND * per_chunk);
                pair.write_round_of(n, size);
                pair.wait_queued(n * size);
                total += pair.read_exact(n * size, size, "tcp_read");
                left -= n;
            }
            total
        })
    });
    pair.assert_empty();
}

fn socket_io(c: &mut Criterion) {
    let mut group = c.benchmark_group("socket_io");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    udp_send(&mut group);
    udp_recv(&mut group);
    tcp(&mut group);
    group.finish();
}

criterion_group!(benches, socket_io);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
