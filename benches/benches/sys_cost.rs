//! The costs a transfer pays that the single-threaded benches leave out, each measured in CPU
//! time (not wall time: a thread waiting for a wakeup burns nothing while it waits, and a
//! transfer's CPU per GB counts only what threads burn).
//!
//! - `sys_cost/wakeup/tokio`: one cross-thread wakeup as the stacks' tasks do it. Two
//!   current-thread tokio runtimes on two threads bounce a message through tokio channels;
//!   each side parks in its runtime's driver (epoll) until the other's send wakes it (mio's
//!   eventfd), so each bounce is one thread blocking and being woken. One iteration is one
//!   wakeup: the CPU both threads (and the kernel on their behalf) burnt per round trip, halved.
//!   A run counts these as voluntary context switches.
//! - `sys_cost/page_fault/anon-4k`: one minor page fault on fresh anonymous memory (fault,
//!   zeroing, and its share of the unmap), as when an allocator returns memory to the kernel
//!   and takes it back. A run counts these as minor faults.
//!
//! - `sys_cost/count_add/{one-line,own-line}`: one relaxed `fetch_add` while a second thread
//!   adds as fast to the same counter, or to one on a cache line of its own: what a counter
//!   that every client thread writes per response chunk costs each write once the threads
//!   run on different cores (qbench's body-byte counter is striped per thread for this).
//! - `sys_cost/clock_read/tokio`: one read of tokio's `Instant::now()`, the monotonic clock
//!   every figure of a run is stamped with (its vDSO `clock_gettime`, no syscall on this
//!   kernel's `tsc` clock source): what each of a request's stamps costs.
//!
//! The syscalls a QUIC ACK costs (one `sendmsg` at the receiver, its share of a `recvmmsg` at
//! the sender) are `socket_io/udp_send/sendmsg` and `socket_io/udp_recv/recvmmsg`.

use std::time::Duration;

use criterion::{criterion_group, Criterion};
use qbench_benches::sys::{process_cpu, thread_cpu, thread_minor_faults};
use tokio::sync::mpsc;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn wakeup(c: &mut Criterion) {
    let (to_echo, mut echo_rx) = mpsc::unbounded_channel::<u64>();
    let (echo_tx, mut back) = mpsc::unbounded_channel::<u64>();
    let echo = std::thread::spawn(move || {
        runtime().block_on(async move {
            while let Some(v) = echo_rx.recv().await {
                if echo_tx.send(v).is_err() {
                    break;
                }
            }
        })
    });
    let rt = runtime();
    let mut g = c.benchmark_group("sys_cost/wakeup");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = process_cpu();
                for i in 0..iters {
                    to_echo.send(i).expect("echo thread alive");
                    let got = back.recv().await.expect("echo thread alive");
                    assert_eq!(got, i, "echoed out of order");
                }
                // Two wakeups per round trip: the echo thread's, then this one's.
                (process_cpu() - start) / 2
            })
        })
    });
    g.finish();
    drop(to_echo);
    echo.join().expect("echo thread");
}

/// Pages touched per mapping: large enough that the map and unmap calls are a small share.
const PAGES: usize = 256;
const PAGE: usize = 4096;

fn page_fault(c: &mut Criterion) {
    let mut g = c.benchmark_group("sys_cost/page_fault");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.bench_function("anon-4k", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(PAGES);
                spent += touch_fresh_pages(n);
                left -= n;
            }
            spent
        })
    });
    g.finish();
}

/// Maps `n` fresh pages, writes one byte to each (one fault each), unmaps them; returns the
/// thread's CPU for it and checks that the kernel counted the faults.
fn touch_fresh_pages(n: usize) -> Duration {
    let len = n * PAGE;
    let faults0 = thread_minor_faults();
    let start = thread_cpu();
    // SAFETY: a fresh private anonymous mapping; only this function touches it, and it is
    // unmapped before returning.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        // Huge pages would take one fault for 512 pages: not what is measured here.
        libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
        let bytes = p.cast::<u8>();
        for i in 0..n {
            std::ptr::write_volatile(bytes.add(i * PAGE), 1);
        }
        assert_eq!(libc::munmap(p, len), 0, "munmap");
    }
    let spent = thread_cpu() - start;
    let faults = thread_minor_faults() - faults0;
    assert!(faults >= n as u64, "{faults} faults for {n} pages");
    spent
}

fn count_add(c: &mut Criterion) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    /// A counter alone on its cache line (and the adjacent line x86 fetches with it).
    #[repr(align(128))]
    struct Line(AtomicU64);
    let mut g = c.benchmark_group("sys_cost/count_add");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    for (name, shared) in [("one-line", true), ("own-line", false)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let (mine, theirs) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
                let (started, stop) = (AtomicBool::new(false), AtomicBool::new(false));
                let target = if shared { &mine } else { &theirs };
                std::thread::scope(|s| {
                    s.spawn(|| {
                        started.store(true, Ordering::Release);
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..64 {
                                target.0.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                    while !started.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        mine.0.fetch_add(1, Ordering::Relaxed);
                    }
                    let spent = start.elapsed();
                    stop.store(true, Ordering::Relaxed);
                    spent
                })
            })
        });
    }
    g.finish();
}

fn clock_read(c: &mut Criterion) {
    let mut g = c.benchmark_group("sys_cost/clock_read");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.bench_function("tokio", |b| b.iter(tokio::time::Instant::now));
    g.finish();
}

criterion_group!(benches, wakeup, page_fault, count_add, clock_read);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
