//! The userspace delay line for kernels without `netem`.
//!
//! Policy routing on the router sends one direction's packets into a TUN device; a reader
//! thread takes them out, stamps them with the monotonic clock and queues them with a due time
//! (`arrival + delay + jitter`), and a writer thread writes each one back into the same TUN
//! when it is due, where the kernel routes it on. With offloads on the TUN, each packet may be
//! a GSO super-packet of up to 64 KiB whose `virtio_net_hdr` is passed through untouched.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::tun::Tun;
use qbench_core::report::link::LATE_STEPS_US;

mod queue;
mod segments;
mod sys;
use queue::*;

/// Largest packet the TUN can hand over: a 64 KiB GSO super-packet plus its vnet header.
const BIG_BUF: usize = 65536 + 128;
/// Packets up to this size (ACKs, MTU-sized segments) are copied into small buffers so a
/// queue full of ACKs does not pin 64 KiB per packet.
const SMALL_BUF: usize = 2048;
const MAX_QUEUE_PACKETS: usize = 100_000;
/// Counted in buffer capacity, which is what the queue really holds on to.
const MAX_QUEUE_BYTES: usize = 256 << 20;
/// Idle buffers kept for reuse: 32 MiB of big ones, 16 MiB of small ones at most.
const POOL_KEEP_BIG: usize = 512;
const POOL_KEEP_SMALL: usize = 8192;
/// Packets read before they are handed to the queue under one lock.
const READ_BATCH: usize = 64;
/// A batch goes to the writer at once when a packet in it is due within this, so batching
/// adds no latency at small delays.
const HANDOFF_SLACK: Duration = Duration::from_micros(100);
/// Packets taken off the queue under one lock.
const WRITE_BATCH: usize = 256;
/// Upper bound on how long either thread goes without checking the stop flag.
const POLL_TIMEOUT_MS: libc::c_int = 50;
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// Cap on how early the writer wakes before a packet is due to spin the rest of the way.
const MAX_SPIN: Duration = Duration::from_micros(100);
/// Initial guess of how late a timed wait wakes up on a VM; learned from then on.
const INITIAL_WAKE_SKEW: Duration = Duration::from_micros(50);
/// Nice value and scheduler slice of the forwarder threads (see `sys::tune_scheduling`).
const THREAD_NICE: libc::c_int = -10;
const THREAD_SLICE: Duration = Duration::from_micros(100);
/// Longest delay + jitter accepted: the spec's own bound (beyond it `Instant` arithmetic
/// could overflow, and such a link would be meaningless anyway).
const MAX_TOTAL_DELAY: Duration = qbench_core::spec::link_bounds::MAX_DELAY;

/// What one direction of the link does to each packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairment {
    pub delay: Duration,
    /// Each packet gets an extra uniformly random delay in [0, jitter].
    pub jitter: Duration,
    /// If false, packets leave in arrival order even with jitter (departure = max(own due time,
    /// previous departure)); if true, jitter may reorder packets.
    pub reorder: bool,
    /// Drop probability in [0,1] applied here (used when the kernel has no nftables); 0 = none.
    pub loss: f64,
}

impl Default for Impairment {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder: false,
            loss: 0.0,
        }
    }
}

impl Impairment {
    fn validate(&self) -> io::Result<()> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(invalid(format!(
                "loss must be within [0, 1], got {}",
                self.loss
            )));
        }
        let total = self.delay.checked_add(self.jitter);
        if total.is_none_or(|t| t > MAX_TOTAL_DELAY) {
            return Err(invalid(format!(
                "delay + jitter must be at most {MAX_TOTAL_DELAY:?}, got {:?} + {:?}",
                self.delay, self.jitter
            )));
        }
        Ok(())
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

pub use qbench_core::report::link::ForwarderStats;

/// A running delay line on one TUN device: a reader and a writer thread.
pub struct Forwarder {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Forwarder {
    /// Takes an open Tun and starts forwarding on dedicated OS thread(s). Must not need tokio.
    ///
    /// The threads are spawned from the calling thread and so live in its network namespace;
    /// the TUN itself stays bound to the namespace it was opened in.
    pub fn start(tun: Tun, imp: Impairment) -> io::Result<Self> {
        imp.validate()?;
        let shared = Arc::new(Shared::new(tun, imp));
        let mut fwd = Self {
            shared,
            threads: Vec::with_capacity(2),
        };
        // If the second spawn fails, dropping `fwd` stops the first thread.
        fwd.spawn("tx", writer_loop)?;
        fwd.spawn("rx", reader_loop)?;
        Ok(fwd)
    }

    pub fn stats(&self) -> ForwarderStats {
        self.shared.counters.snapshot()
    }

    /// Stops the threads and returns final stats. Also done on Drop.
    pub fn stop(mut self) -> ForwarderStats {
        self.shutdown();
        self.stats()
    }

    fn spawn(&mut self, role: &str, body: fn(&Shared)) -> io::Result<()> {
        let shared = Arc::clone(&self.shared);
        // Linux keeps 15 bytes of a thread name; "fwd-tx-fwup" fits.
        let name: String = format!("fwd-{role}-{}", shared.tun.name())
            .chars()
            .take(15)
            .collect();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || body(&shared))?;
        self.threads.push(handle);
        Ok(())
    }

    fn shutdown(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.shared.request_stop();
        for t in self.threads.drain(..) {
            // A panicked thread has nothing left to clean up; its counters are still valid.
            let _ = t.join();
        }
        let leftover = self.shared.lock_queue().drain_all();
        self.shared
            .counters
            .add_dropped(leftover.iter().map(|p| p.segs).sum());
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("tun", &self.shared.tun.name())
            .field("impairment", &self.shared.imp)
            .field("stats", &self.stats())
            .finish()
    }
}

/// State shared by the two threads and the handle.
struct Shared {
    tun: Tun,
    imp: Impairment,
    stop: AtomicBool,
    /// Written on stop so the reader's poll() returns at once; None if eventfd failed, and
    /// then the poll timeout bounds the stop latency instead.
    wake: Option<OwnedFd>,
    queue: Mutex<Queue>,
    /// Signals the writer that the head of the queue changed (or stop).
    head_changed: Condvar,
    pool: Mutex<Pool>,
    counters: Counters,
}

impl Shared {
    fn new(tun: Tun, imp: Impairment) -> Self {
        Self {
            tun,
            imp,
            stop: AtomicBool::new(false),
            wake: sys::eventfd().ok(),
            queue: Mutex::new(Queue::new(imp.reorder)),
            head_changed: Condvar::new(),
            pool: Mutex::new(Pool::default()),
            counters: Counters::default(),
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(fd) = &self.wake {
            sys::signal_eventfd(fd);
        }
        // Taking the lock orders this notify after any writer check of `stop`, so the writer
        // cannot miss it between checking and waiting.
        let _q = self.lock_queue();
        self.head_changed.notify_all();
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        // A poisoned queue is still structurally sound: its operations never leave it torn.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn vnet_len(&self) -> usize {
        self.tun.vnet_hdr_len()
    }
}

#[derive(Default)]
struct Counters {
    packets: AtomicU64,
    writes: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    reordered: AtomicU64,
    max_queue: AtomicUsize,
    late: [AtomicU64; 3],
}

impl Counters {
    fn add_dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ForwarderStats {
        ForwarderStats {
            packets: self.packets.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            max_queue: self.max_queue.load(Ordering::Relaxed),
            reordered: self.reordered.load(Ordering::Relaxed),
            late: std::array::from_fn(|i| self.late[i].load(Ordering::Relaxed)),
        }
    }

    /// Counts the packets of a batch taken at `taken` by how far past their due time.
    fn count_late(&self, batch: &[Packet], taken: Instant) {
        for p in batch {
            let late = taken.saturating_duration_since(p.due).as_micros() as u64;
            for (step, n) in LATE_STEPS_US.iter().zip(&self.late) {
                if late > *step {
                    n.fetch_add(p.segs, Ordering::Relaxed);
                }
            }
        }
    }
}

/// How an I/O error on the TUN affects the thread that saw it.
enum ErrorAction {
    Retry,
    WaitReady,
    /// The device is gone or the descriptor unusable: stop forwarding.
    Fatal,
    /// Count it and carry on (e.g. a malformed packet or the link set down for a moment).
    Skip,
}

fn classify(e: &io::Error) -> ErrorAction {
    match e.kind() {
        io::ErrorKind::Interrupted => return ErrorAction::Retry,
        io::ErrorKind::WouldBlock => return ErrorAction::WaitReady,
        _ => {}
    }
    match e.raw_os_error() {
        Some(libc::EBADF | libc::EBADFD | libc::ENODEV | libc::ENXIO) => ErrorAction::Fatal,
        _ => ErrorAction::Skip,
    }
}

/// Reads packets, decides their fate and queues them; exits on stop or a fatal error.
fn reader_loop(sh: &Shared) {
    sys::tune_scheduling();
    let mut sched = Scheduler::new(sh.imp, rand::random());
    let mut buf = sh.lock_pool().take_big();
    let mut batch = Pending::default();
    let mut transient_errors = 0u32;
    while !sh.stopping() {
        match sh.tun.recv(&mut buf) {
            Ok(n) => {
                let arrival = Instant::now();
                transient_errors = 0;
                if let Some(p) = admit(sh, &mut sched, &mut buf, n, arrival) {
                    batch.push(p);
                }
                if batch.should_flush(arrival) {
                    enqueue(sh, &mut batch);
                }
            }
            Err(e) => match classify(&e) {
                ErrorAction::Retry => {}
                ErrorAction::WaitReady => {
                    enqueue(sh, &mut batch);
                    sys::wait_readable(sh.tun.as_raw_fd(), sh.wake.as_ref());
                }
                ErrorAction::Fatal => {
                    sh.request_stop();
                    break;
                }
                ErrorAction::Skip => {
                    enqueue(sh, &mut batch);
                    transient_errors += 1;
                    // An error that repeats must not turn into a busy loop on a 2-core box.
                    if transient_errors > 3 {
                        sys::wait_readable(sh.tun.as_raw_fd(), sh.wake.as_ref());
                    }
                }
            },
        }
    }
    let mut pool = sh.lock_pool();
    pool.put(buf);
    for p in batch.pkts {
        pool.put(p.buf);
    }
}

/// Packets read but not yet queued.
#[derive(Default)]
struct Pending {
    pkts: Vec<Packet>,
    earliest: Option<Instant>,
}

impl Pending {
    fn push(&mut self, p: Packet) {
        self.earliest = Some(self.earliest.map_or(p.due, |e| e.min(p.due)));
        self.pkts.push(p);
    }

    fn should_flush(&self, now: Instant) -> bool {
        self.pkts.len() >= READ_BATCH || self.earliest.is_some_and(|e| e <= now + HANDOFF_SLACK)
    }

    fn take(&mut self) -> std::vec::Drain<'_, Packet> {
        self.earliest = None;
        self.pkts.drain(..)
    }
}

/// Turns the packet in `buf` into a queued packet, or None if it is lost. Small packets are
/// copied out so `buf` is reused; large ones take `buf` and leave a fresh buffer in its place.
fn admit(
    sh: &Shared,
    sched: &mut Scheduler,
    buf: &mut Vec<u8>,
    n: usize,
    arrival: Instant,
) -> Option<Packet> {
    if n <= sh.vnet_len() {
        return None;
    }
    let segs = segments::on_wire(&buf[..n], sh.vnet_len());
    let Some(slot) = sched.admit(arrival) else {
        sh.counters.add_dropped(segs);
        return None;
    };
    let data = if n <= SMALL_BUF {
        let mut small = sh.lock_pool().take_small();
        small[..n].copy_from_slice(&buf[..n]);
        small
    } else {
        let fresh = sh.lock_pool().take_big();
        std::mem::replace(buf, fresh)
    };
    Some(Packet {
        buf: data,
        len: n,
        segs,
        due: slot.due,
        seq: slot.seq,
        overtakes: slot.overtakes,
    })
}

/// Moves `batch` into the queue under one lock, dropping what does not fit, and wakes the
/// writer only if the head of the queue changed while it sleeps.
fn enqueue(sh: &Shared, batch: &mut Pending) {
    if batch.pkts.is_empty() {
        return;
    }
    let mut rejected: Vec<Vec<u8>> = Vec::new();
    let mut rejected_segs = 0u64;
    let mut overtakers = 0u64;
    let mut q = sh.lock_queue();
    let head_before = q.head_due();
    for p in batch.take() {
        if q.has_room_for(&p) {
            overtakers += u64::from(p.overtakes);
            q.push(p);
        } else {
            rejected_segs += p.segs;
            rejected.push(p.buf);
        }
    }
    sh.counters.max_queue.fetch_max(q.len(), Ordering::Relaxed);
    let wake = q.writer_waiting && q.head_due() != head_before;
    drop(q);
    if wake {
        sh.head_changed.notify_one();
    }
    sh.counters
        .reordered
        .fetch_add(overtakers, Ordering::Relaxed);
    if !rejected.is_empty() {
        sh.counters.add_dropped(rejected_segs);
        let mut pool = sh.lock_pool();
        rejected.into_iter().for_each(|b| pool.put(b));
    }
}

/// Learns how late this thread's timed waits wake up (tens of microseconds on a VM), so the
/// writer can wake that much early and spin only the remainder: departures within a few
/// microseconds of their due time, without long spins that would starve the other core's work.
struct WakeSkew {
    ewma_ns: u64,
}

impl WakeSkew {
    fn new() -> Self {
        Self {
            ewma_ns: INITIAL_WAKE_SKEW.as_nanos() as u64,
        }
    }

    /// How long before a due time to stop sleeping and start spinning.
    fn margin(&self) -> Duration {
        Duration::from_nanos(self.ewma_ns).min(MAX_SPIN)
    }

    fn observe(&mut self, late: Duration) {
        // A wake-up delayed by preemption says nothing about timer precision; clamp it.
        let late = late.min(MAX_SPIN * 2).as_nanos() as u64;
        self.ewma_ns = (self.ewma_ns * 7 + late) / 8;
    }
}

/// Writes packets back into the TUN as they fall due; exits on stop or a fatal error.
fn writer_loop(sh: &Shared) {
    sys::tune_scheduling();
    sys::set_timer_slack_ns(1);
    let mut skew = WakeSkew::new();
    let mut batch: Vec<Packet> = Vec::with_capacity(WRITE_BATCH);
    while take_due(sh, &mut skew, &mut batch) {
        sh.counters.count_late(&batch, Instant::now());
        let written = batch.iter().take_while(|p| write_packet(sh, p)).count();
        if written < batch.len() {
            // The TUN is unusable: the rest of the batch cannot be written either.
            sh.counters
                .add_dropped(batch[written..].iter().map(|p| p.segs).sum());
            sh.request_stop();
        }
        let mut pool = sh.lock_pool();
        batch.drain(..).for_each(|p| pool.put(p.buf));
    }
}

/// Blocks until at least one packet is due and moves the due ones into `batch`; false on stop.
fn take_due(sh: &Shared, skew: &mut WakeSkew, batch: &mut Vec<Packet>) -> bool {
    let mut q = sh.lock_queue();
    loop {
        if sh.stopping() {
            return false;
        }
        let now = Instant::now();
        let margin = skew.margin();
        let (timeout, for_head) = match q.head_due() {
            Some(due) if due <= now => {
                q.pop_due(now, batch, WRITE_BATCH);
                return true;
            }
            Some(due) if due - now <= margin => {
                drop(q);
                spin_until(due);
                q = sh.lock_queue();
                continue;
            }
            Some(due) => (due - now - margin, true),
            None => (IDLE_WAIT, false),
        };
        q.writer_waiting = true;
        let (guard, result) = sh
            .head_changed
            .wait_timeout(q, timeout)
            .unwrap_or_else(|e| e.into_inner());
        q = guard;
        q.writer_waiting = false;
        if for_head && result.timed_out() {
            skew.observe(Instant::now().saturating_duration_since(now + timeout));
        }
    }
}

/// Busy-waits the last few microseconds (at most `MAX_SPIN`). No yield: on a busy core a
/// yield can hand the CPU away for a whole scheduler slice, milliseconds late.
fn spin_until(due: Instant) {
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Writes one packet; false only when the TUN is unusable.
fn write_packet(sh: &Shared, p: &Packet) -> bool {
    let data = &p.buf[..p.len];
    for _ in 0..4 {
        match sh.tun.send(data) {
            Ok(_) => {
                sh.counters.packets.fetch_add(p.segs, Ordering::Relaxed);
                sh.counters.writes.fetch_add(1, Ordering::Relaxed);
                let payload = p.len.saturating_sub(sh.vnet_len());
                sh.counters
                    .bytes
                    .fetch_add(payload as u64, Ordering::Relaxed);
                return true;
            }
            Err(e) => match classify(&e) {
                ErrorAction::Retry => {}
                ErrorAction::WaitReady => sys::wait_writable(sh.tun.as_raw_fd()),
                ErrorAction::Fatal => return false,
                ErrorAction::Skip => break,
            },
        }
    }
    sh.counters.add_dropped(p.segs);
    true
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_e2e;
#[cfg(test)]
mod tests_netns;
