//! What a stream costs the kernel when its writer and reader run at once on two threads, in
//! CPU time of the whole process (both threads and the kernel on their behalf).
//!
//! The `socket_io` benches write a round and then drain it on the same thread, so each call
//! runs alone. In a transfer the two ends run concurrently on different cores: every write
//! wakes or races the reader, ACKs and window updates are processed while the other side holds
//! the socket, and the cache lines of the socket and its queues move between cores. On the
//! 2-vCPU VMs this runs on, iperf3 over loopback burns about four times the CPU per byte that
//! `socket_io/tcp_write` + `socket_io/tcp_read` add up to; `qbench cost` takes these benches
//! instead of that sum for the stream's socket work.
//!
//! Each side sleeps only when it has caught up with the other, and then until the other is a
//! round ahead (a channel message per round), so that the pipes take a wakeup per round at
//! most: a transfer's own wakeups are counted by the run and costed by `sys_cost/wakeup`, and
//! a pipe that slept after every write would count them twice. The wakeups each bench took
//! are printed beside criterion's lines.
//!
//! - `socket_pipe/tcp/{16384,65536}`: one loopback TCP connection (`TCP_NODELAY`, 64 MiB
//!   buffers as in `socket_io`), the bench thread writing 64 KiB per call, a second thread
//!   reading at most 16 or 64 KiB per call (rustls reads 16 KiB at a time) from a
//!   non-blocking socket; rounds of 4 MiB. One iteration is one 64 KiB write and the reads
//!   that take it; the difference between the two read sizes, over the three extra reads, is
//!   what one more read costs while the writer runs.
//! - `socket_pipe/udp/gso`: quinn-udp on both ends as quinn uses it, the bench thread sending
//!   ten 1452-byte segments per GSO `sendmsg`, a second thread receiving with GRO and
//!   `recvmmsg` (32 messages per call); rounds of 1440 datagrams (about 2 MiB). UDP has no
//!   flow control, so the sender stays at most two rounds ahead of what the receiver has
//!   taken, far below the receive buffer: a drop would stall the receiver and fail the
//!   bench. One iteration is one datagram.

mod tcp;
mod udp;

use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, Criterion, Throughput};
use qbench_benches::sys::{process_cpu, process_wakeups};

/// One 64 KiB application write (and the reader's buffer).
const TCP_CHUNK: usize = 65_536;
/// 64 KiB chunks per TCP round (4 MiB).
const TCP_ROUND: u64 = 64;
/// A full-size QUIC datagram at a 1500-byte path MTU over IPv6 (as in `socket_io`).
const DATAGRAM: usize = 1452;
/// Segments quinn puts in one GSO send.
const GSO_SEGMENTS: usize = 10;
/// Datagrams per round.
const UDP_ROUND: usize = 1440;
/// Anything not delivered after this long was dropped.
const STALL: Duration = Duration::from_secs(5);

/// Sleeps until `fd` is readable; fails after `STALL` (what was missing had been dropped).
fn wait_readable(fd: std::os::fd::RawFd, what: &str) {
    let ok = qbench_benches::sys::wait_readable(fd, Instant::now() + STALL);
    assert!(ok, "{what}: nothing readable for {STALL:?}; dropped?");
}

/// A running count the other thread posts at every round (and at the end of an order), and
/// this one sleeps on when it has caught up.
struct Posted {
    rx: Receiver<u64>,
    seen: u64,
}

impl Posted {
    fn new(rx: Receiver<u64>) -> Self {
        Self { rx, seen: 0 }
    }

    /// The latest count posted so far, without waiting.
    fn latest(&mut self) -> u64 {
        while let Ok(v) = self.rx.try_recv() {
            self.seen = v;
        }
        self.seen
    }

    /// Sleeps until the count exceeds `than`; returns it.
    fn beyond(&mut self, than: u64, what: &str) -> u64 {
        while self.latest() <= than {
            self.seen = self
                .rx
                .recv_timeout(STALL)
                .unwrap_or_else(|e| panic!("{what}: other side silent ({e})"));
        }
        self.seen
    }
}

/// A sender and a receiver thread streaming at once.
trait Pipe {
    /// Streams `iters` iterations' worth and returns once the receiver has all of it.
    fn stream(&mut self, iters: u64);
}

/// Benchmarks `pipe` in CPU time of the process per iteration, and prints the wakeups the
/// pipe took per iteration.
fn bench(group: &mut BenchmarkGroup<'_, WallTime>, id: &str, bytes: usize, pipe: &mut impl Pipe) {
    let (mut switches, mut total) = (0u64, 0u64);
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let (cpu0, sw0) = (process_cpu(), process_wakeups());
            pipe.stream(iters);
            let (cpu, sw) = (process_cpu() - cpu0, process_wakeups() - sw0);
            switches += sw;
            total += iters;
            cpu
        })
    });
    if total > 0 {
        println!(
            "socket_pipe/{id}: {:.4} wakeups per iteration ({switches} over {total} iterations)",
            switches as f64 / total as f64
        );
    }
}

fn socket_pipe(c: &mut Criterion) {
    let mut group = c.benchmark_group("socket_pipe");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20);
    for read_size in [TCP_CHUNK / 4, TCP_CHUNK] {
        let id = format!("tcp/{read_size}");
        bench(
            &mut group,
            &id,
            TCP_CHUNK,
            &mut tcp::TcpPipe::new(read_size),
        );
    }
    bench(&mut group, "udp/gso", DATAGRAM, &mut udp::UdpPipe::new());
    group.finish();
}

criterion_group!(benches, socket_pipe);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
