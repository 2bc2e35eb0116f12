//! The userspace delay line for kernels without `netem`.
//!
//! Policy routing on the router sends one direction's packets into a TUN device; a reader
//! thread takes them out, stamps them with the monotonic clock and queues them with a due time
//! (`arrival + delay + jitter`), and a writer thread writes each one back into the same TUN
//! when it is due, where the kernel routes it on. With offloads on the TUN, each packet may be
//! a GSO super-packet of up to 64 KiB whose `virtio_net_hdr` is passed through untouched.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::tun::Tun;

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
/// Packets taken off the queue under one lock.
const WRITE_BATCH: usize = 256;
/// Upper bound on how long either thread goes without checking the stop flag.
const POLL_TIMEOUT_MS: libc::c_int = 50;
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// Cap on how early the writer wakes before a packet is due to spin the rest of the way.
/// Nice value and scheduler slice of the forwarder threads (see `tune_scheduling`).
const THREAD_NICE: libc::c_int = -10;
const THREAD_SLICE: Duration = Duration::from_micros(100);
const MAX_SPIN: Duration = Duration::from_micros(100);
/// Initial guess of how late a timed wait wakes up on a VM; learned from then on.
const INITIAL_WAKE_SKEW: Duration = Duration::from_micros(50);
/// Longest delay + jitter accepted; beyond it `Instant` arithmetic could overflow and such a
/// link would be meaningless anyway.
const MAX_TOTAL_DELAY: Duration = Duration::from_secs(3600);

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
        Impairment {
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

/// Counters of one forwarder. A GSO super-packet counts as one packet; `bytes` excludes the
/// vnet header. `dropped` covers random loss, queue overflow, failed writes and packets still
/// queued when the forwarder stopped. `reordered` counts packets scheduled to leave before a
/// packet that arrived earlier.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ForwarderStats {
    pub packets: u64,
    pub bytes: u64,
    pub dropped: u64,
    pub max_queue: usize,
    pub reordered: u64,
}

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
    pub fn start(tun: Tun, imp: Impairment) -> io::Result<Forwarder> {
        imp.validate()?;
        let shared = Arc::new(Shared::new(tun, imp));
        let mut fwd = Forwarder {
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

    /// Whether both threads are still forwarding; false after a fatal error on the TUN (for
    /// example when the device was deleted), after which the routing must fail closed.
    pub fn is_running(&self) -> bool {
        self.threads.len() == 2 && self.threads.iter().all(|t| !t.is_finished())
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
        self.shared.counters.add_dropped(leftover.len() as u64);
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
    fn new(tun: Tun, imp: Impairment) -> Shared {
        Shared {
            tun,
            imp,
            stop: AtomicBool::new(false),
            wake: eventfd().ok(),
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
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
            let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
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
    bytes: AtomicU64,
    dropped: AtomicU64,
    reordered: AtomicU64,
    max_queue: AtomicUsize,
}

impl Counters {
    fn add_dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ForwarderStats {
        ForwarderStats {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            max_queue: self.max_queue.load(Ordering::Relaxed),
            reordered: self.reordered.load(Ordering::Relaxed),
        }
    }
}

/// Reusable packet buffers in two size classes. A buffer's `len()` is always its class size;
/// the packet length travels separately, so reuse never re-zeroes memory.
#[derive(Default)]
struct Pool {
    big: Vec<Vec<u8>>,
    small: Vec<Vec<u8>>,
}

impl Pool {
    fn take_big(&mut self) -> Vec<u8> {
        self.big.pop().unwrap_or_else(|| vec![0; BIG_BUF])
    }

    fn take_small(&mut self) -> Vec<u8> {
        self.small.pop().unwrap_or_else(|| vec![0; SMALL_BUF])
    }

    fn put(&mut self, buf: Vec<u8>) {
        match buf.len() {
            BIG_BUF if self.big.len() < POOL_KEEP_BIG => self.big.push(buf),
            SMALL_BUF if self.small.len() < POOL_KEEP_SMALL => self.small.push(buf),
            _ => {}
        }
    }
}

struct Packet {
    buf: Vec<u8>,
    len: usize,
    due: Instant,
    /// Arrival order; breaks ties between equal due times in the heap.
    seq: u64,
    /// Scheduled to leave before a packet that arrived earlier.
    overtakes: bool,
}

/// Heap entry ordered so that `BinaryHeap`, a max-heap, pops the earliest due packet first.
struct Earliest(Packet);

impl PartialEq for Earliest {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Earliest {}

impl PartialOrd for Earliest {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Earliest {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.0.due, other.0.seq).cmp(&(self.0.due, self.0.seq))
    }
}

enum Lane {
    /// Due times are non-decreasing, so arrival order is departure order.
    Fifo(VecDeque<Packet>),
    Heap(BinaryHeap<Earliest>),
}

struct Queue {
    lane: Lane,
    /// Capacity of the queued buffers.
    bytes: usize,
    /// The writer is blocked on the condvar; only then is a notify worth a syscall.
    writer_waiting: bool,
}

impl Queue {
    fn new(reorder: bool) -> Queue {
        Queue {
            lane: if reorder {
                Lane::Heap(BinaryHeap::new())
            } else {
                Lane::Fifo(VecDeque::new())
            },
            bytes: 0,
            writer_waiting: false,
        }
    }

    fn len(&self) -> usize {
        match &self.lane {
            Lane::Fifo(q) => q.len(),
            Lane::Heap(h) => h.len(),
        }
    }

    fn head_due(&self) -> Option<Instant> {
        match &self.lane {
            Lane::Fifo(q) => q.front().map(|p| p.due),
            Lane::Heap(h) => h.peek().map(|e| e.0.due),
        }
    }

    fn has_room_for(&self, p: &Packet) -> bool {
        self.len() < MAX_QUEUE_PACKETS && self.bytes + p.buf.len() <= MAX_QUEUE_BYTES
    }

    fn push(&mut self, p: Packet) {
        self.bytes += p.buf.len();
        match &mut self.lane {
            Lane::Fifo(q) => q.push_back(p),
            Lane::Heap(h) => h.push(Earliest(p)),
        }
    }

    fn pop(&mut self) -> Option<Packet> {
        let p = match &mut self.lane {
            Lane::Fifo(q) => q.pop_front(),
            Lane::Heap(h) => h.pop().map(|e| e.0),
        }?;
        self.bytes -= p.buf.len();
        Some(p)
    }

    /// Moves packets due by `now` into `out`, earliest first, at most `max` of them.
    fn pop_due(&mut self, now: Instant, out: &mut Vec<Packet>, max: usize) {
        while out.len() < max && self.head_due().is_some_and(|d| d <= now) {
            match self.pop() {
                Some(p) => out.push(p),
                None => break,
            }
        }
    }

    fn drain_all(&mut self) -> Vec<Packet> {
        std::iter::from_fn(|| self.pop()).collect()
    }
}

/// Decides each arriving packet's fate: lost, or due at a certain time.
struct Scheduler {
    imp: Impairment,
    rng: SplitMix64,
    /// Latest due time handed out so far.
    last_due: Option<Instant>,
    seq: u64,
}

struct Slot {
    due: Instant,
    seq: u64,
    overtakes: bool,
}

impl Scheduler {
    fn new(imp: Impairment, seed: u64) -> Scheduler {
        Scheduler {
            imp,
            rng: SplitMix64(seed),
            last_due: None,
            seq: 0,
        }
    }

    /// None when the packet is lost.
    fn admit(&mut self, arrival: Instant) -> Option<Slot> {
        if self.imp.loss > 0.0 && self.rng.next_f64() < self.imp.loss {
            return None;
        }
        let mut due = arrival + self.imp.delay + self.jitter_sample();
        let overtakes = match self.last_due {
            Some(last) if due < last && !self.imp.reorder => {
                due = last;
                false
            }
            Some(last) => due < last,
            None => false,
        };
        self.last_due = Some(self.last_due.map_or(due, |l| l.max(due)));
        self.seq += 1;
        Some(Slot {
            due,
            seq: self.seq,
            overtakes,
        })
    }

    fn jitter_sample(&mut self) -> Duration {
        let max = self.imp.jitter.as_nanos() as u64;
        if max == 0 {
            return Duration::ZERO;
        }
        // Modulo bias is below 2^-24 for any jitter under an hour: irrelevant here.
        Duration::from_nanos(self.rng.next_u64() % (max + 1))
    }
}

/// SplitMix64: tiny, fast and statistically sound for loss and jitter draws; not for secrets.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

fn random_seed() -> u64 {
    let mut seed = [0u8; 8];
    // SAFETY: getrandom writes at most `seed.len()` bytes into the live array.
    let n = unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), libc::GRND_NONBLOCK) };
    if n == seed.len() as isize {
        return u64::from_ne_bytes(seed);
    }
    // No entropy yet (early boot): the time is good enough to decorrelate two forwarders.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32) ^ (&seed as *const _ as u64)
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd, is valid, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

/// Waits until the TUN has a packet to read, the stop eventfd fires, or the timeout passes.
fn wait_readable(sh: &Shared) {
    let mut fds = [
        poll_fd(sh.tun.as_raw_fd(), libc::POLLIN),
        poll_fd(sh.wake.as_ref().map_or(-1, |f| f.as_raw_fd()), libc::POLLIN),
    ];
    // SAFETY: `fds` is a live array of two pollfd; a negative fd entry is ignored by poll.
    let _ = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_TIMEOUT_MS) };
}

fn wait_writable(fd: RawFd) {
    let mut fds = [poll_fd(fd, libc::POLLOUT)];
    // SAFETY: `fds` is a live array of one pollfd.
    let _ = unsafe { libc::poll(fds.as_mut_ptr(), 1, 1) };
}

fn poll_fd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Reads packets, decides their fate and queues them; exits on stop or a fatal error.
fn reader_loop(sh: &Shared) {
    tune_scheduling();
    let mut sched = Scheduler::new(sh.imp, random_seed());
    let mut buf = sh.lock_pool().take_big();
    let mut batch: Vec<Packet> = Vec::with_capacity(READ_BATCH);
    let mut transient_errors = 0u32;
    while !sh.stopping() {
        match sh.tun.recv(&mut buf) {
            Ok(n) => {
                let arrival = Instant::now();
                transient_errors = 0;
                if let Some(p) = admit(sh, &mut sched, &mut buf, n, arrival) {
                    batch.push(p);
                }
                if batch.len() >= READ_BATCH {
                    enqueue(sh, &mut batch);
                }
            }
            Err(e) => match classify(&e) {
                ErrorAction::Retry => {}
                ErrorAction::WaitReady => {
                    enqueue(sh, &mut batch);
                    wait_readable(sh);
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
                        wait_readable(sh);
                    }
                }
            },
        }
    }
    let mut pool = sh.lock_pool();
    pool.put(buf);
    for p in batch {
        pool.put(p.buf);
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
    let Some(slot) = sched.admit(arrival) else {
        sh.counters.add_dropped(1);
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
        due: slot.due,
        seq: slot.seq,
        overtakes: slot.overtakes,
    })
}

/// Moves `batch` into the queue under one lock, dropping what does not fit, and wakes the
/// writer only if the head of the queue changed while it sleeps.
fn enqueue(sh: &Shared, batch: &mut Vec<Packet>) {
    if batch.is_empty() {
        return;
    }
    let mut rejected: Vec<Vec<u8>> = Vec::new();
    let mut overtakers = 0u64;
    let mut q = sh.lock_queue();
    let head_before = q.head_due();
    for p in batch.drain(..) {
        if q.has_room_for(&p) {
            overtakers += u64::from(p.overtakes);
            q.push(p);
        } else {
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
        sh.counters.add_dropped(rejected.len() as u64);
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
    fn new() -> WakeSkew {
        WakeSkew {
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
    tune_scheduling();
    set_timer_slack_ns(1);
    let mut skew = WakeSkew::new();
    let mut batch: Vec<Packet> = Vec::with_capacity(WRITE_BATCH);
    while take_due(sh, &mut skew, &mut batch) {
        let written = batch.iter().take_while(|p| write_packet(sh, p)).count();
        if written < batch.len() {
            // The TUN is unusable: the rest of the batch cannot be written either.
            sh.counters.add_dropped((batch.len() - written) as u64);
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
                sh.counters.packets.fetch_add(1, Ordering::Relaxed);
                let payload = p.len.saturating_sub(sh.vnet_len());
                sh.counters
                    .bytes
                    .fetch_add(payload as u64, Ordering::Relaxed);
                return true;
            }
            Err(e) => match classify(&e) {
                ErrorAction::Retry => {}
                ErrorAction::WaitReady => wait_writable(sh.tun.as_raw_fd()),
                ErrorAction::Fatal => return false,
                ErrorAction::Skip => break,
            },
        }
    }
    sh.counters.add_dropped(1);
    true
}

/// Runs this thread like the kernel's own packet processing would run: ahead of the
/// benchmark's processes. Without it, on a 2-core box whose cores a benchmark saturates,
/// a forwarder thread woken by its timer waits for the next scheduler tick (4 ms at HZ=250)
/// and packets leave milliseconds late (measured: RTTs +4..20 ms over the configured delay).
/// A short EEVDF slice (Linux 6.12+) lets a waking thread preempt at once; the negative nice
/// (needs CAP_SYS_NICE) keeps its share under load. Both are best effort: without them the
/// forwarder only gets less precise.
fn tune_scheduling() {
    let mut attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: THREAD_NICE,
        sched_priority: 0,
        sched_runtime: THREAD_SLICE.as_nanos() as u64,
        sched_deadline: 0,
        sched_period: 0,
    };
    if sched_setattr(&attr).is_err() {
        attr.sched_nice = 0;
        let _ = sched_setattr(&attr);
    }
}

fn sched_setattr(attr: &libc::sched_attr) -> io::Result<()> {
    // SAFETY: the attr pointer is live for the call, its `size` field tells the kernel how much
    // to read, and pid 0 means the calling thread only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            attr as *const libc::sched_attr,
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes timed waits wake within microseconds rather than the default 50 µs slack.
fn set_timer_slack_ns(ns: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects only this thread.
    let _ = unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
}

#[cfg(test)]
mod tests {
    //! Unit tests of the scheduling logic run anywhere. The end-to-end tests need root (CI has
    //! it): each builds its own client/router/server namespaces named `qb-fwdtest-<pid>-<n>*`
    //! with addresses from 198.18.0.0/15 only, and deletes them on drop, even on failure.

    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
    use std::process::{Command, Output, Stdio};
    use std::sync::atomic::AtomicU32;

    fn imp(delay_ms: u64, jitter_ms: u64, reorder: bool, loss: f64) -> Impairment {
        Impairment {
            delay: Duration::from_millis(delay_ms),
            jitter: Duration::from_millis(jitter_ms),
            reorder,
            loss,
        }
    }

    // ---- scheduling logic -------------------------------------------------------------------

    #[test]
    fn fifo_due_times_never_decrease_under_jitter() {
        let mut s = Scheduler::new(imp(5, 20, false, 0.0), 1);
        let t0 = Instant::now();
        let mut last = t0;
        for i in 0..10_000u64 {
            let arrival = t0 + Duration::from_micros(i * 10);
            let slot = s.admit(arrival).expect("no loss configured");
            assert!(slot.due >= last, "packet {i} would overtake");
            assert!(slot.due >= arrival + Duration::from_millis(5));
            assert!(!slot.overtakes);
            last = slot.due;
        }
    }

    #[test]
    fn jitter_stays_within_bounds_and_reorders_when_allowed() {
        let mut s = Scheduler::new(imp(5, 20, true, 0.0), 2);
        let t0 = Instant::now();
        let (mut overtakes, mut max_extra) = (0, Duration::ZERO);
        for i in 0..10_000u64 {
            let arrival = t0 + Duration::from_micros(i * 10);
            let slot = s.admit(arrival).expect("no loss configured");
            let extra = slot.due - arrival - Duration::from_millis(5);
            assert!(extra <= Duration::from_millis(20));
            max_extra = max_extra.max(extra);
            overtakes += u32::from(slot.overtakes);
        }
        assert!(overtakes > 1000, "only {overtakes} overtakes");
        assert!(
            max_extra > Duration::from_millis(19),
            "jitter never reached its range"
        );
    }

    #[test]
    fn loss_fraction_matches_probability() {
        for p in [0.0, 0.01, 0.5, 1.0] {
            let mut s = Scheduler::new(imp(0, 0, false, p), 3);
            let now = Instant::now();
            let n = 100_000;
            let lost = (0..n).filter(|_| s.admit(now).is_none()).count() as f64;
            let sigma = (n as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (lost - n as f64 * p).abs() <= 5.0 * sigma + 0.5,
                "p={p}: lost {lost} of {n}"
            );
        }
    }

    #[test]
    fn heap_pops_earliest_first_and_fifo_in_arrival_order() {
        let t0 = Instant::now();
        let pkt = |ms: u64, seq: u64| Packet {
            buf: vec![0; SMALL_BUF],
            len: 1,
            due: t0 + Duration::from_millis(ms),
            seq,
            overtakes: false,
        };
        let mut q = Queue::new(true);
        for (i, ms) in [30, 10, 20, 10].into_iter().enumerate() {
            q.push(pkt(ms, i as u64));
        }
        let mut out = Vec::new();
        q.pop_due(t0 + Duration::from_millis(25), &mut out, 10);
        let order: Vec<u64> = out.iter().map(|p| p.seq).collect();
        assert_eq!(
            order,
            [1, 3, 2],
            "earliest due first, ties in arrival order"
        );
        assert_eq!(q.len(), 1);
        assert_eq!(q.bytes, SMALL_BUF);
        assert_eq!(q.drain_all().len(), 1);
        assert_eq!(q.bytes, 0);

        let mut q = Queue::new(false);
        q.push(pkt(10, 0));
        q.push(pkt(10, 1));
        q.push(pkt(40, 2));
        out.clear();
        q.pop_due(t0 + Duration::from_millis(10), &mut out, 10);
        assert_eq!(out.iter().map(|p| p.seq).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(q.head_due(), Some(t0 + Duration::from_millis(40)));
    }

    #[test]
    fn invalid_impairments_are_rejected() {
        assert!(imp(0, 0, false, 1.5).validate().is_err());
        assert!(imp(0, 0, false, -0.1).validate().is_err());
        assert!(imp(0, 0, false, f64::NAN).validate().is_err());
        assert!(Impairment {
            delay: Duration::MAX,
            ..Impairment::default()
        }
        .validate()
        .is_err());
        assert!(imp(100, 50, true, 0.3).validate().is_ok());
    }

    // ---- namespaces ----------------------------------------------------------------------

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// Skips a root-only test on a developer machine without root; CI runs as root.
    macro_rules! require_root {
        () => {
            if !is_root() {
                eprintln!("skipped: needs root for network namespaces and /dev/net/tun");
                return;
            }
        };
    }

    fn output(args: &[&str]) -> Output {
        Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", args[0]))
    }

    fn run(args: &[&str]) {
        let out = output(args);
        assert!(
            out.status.success(),
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }

    /// Moves the calling thread into a named namespace; threads it spawns inherit it.
    fn enter(ns: &str) -> io::Result<()> {
        let f = std::fs::File::open(format!("/run/netns/{ns}"))?;
        // SAFETY: setns on a valid namespace fd changes only the calling thread's namespace.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Runs `f` on a fresh thread inside namespace `ns`.
    fn in_ns<T: Send + 'static>(
        ns: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let ns = ns.to_owned();
        std::thread::spawn(move || {
            enter(&ns).unwrap_or_else(|e| panic!("entering {ns}: {e}"));
            f()
        })
    }

    struct Netns {
        name: String,
    }

    impl Netns {
        fn create(name: String) -> Netns {
            run(&["ip", "netns", "add", &name]);
            Netns { name }
        }

        fn ip(&self, args: &[&str]) {
            let mut v = vec!["ip", "-n", self.name.as_str()];
            v.extend_from_slice(args);
            run(&v);
        }

        fn sysctl(&self, settings: &[&str]) {
            let mut v = vec!["ip", "netns", "exec", self.name.as_str(), "sysctl", "-qw"];
            v.extend_from_slice(settings);
            run(&v);
        }

        fn exec(&self, args: &[&str]) -> Output {
            let mut v = vec!["ip", "netns", "exec", self.name.as_str()];
            v.extend_from_slice(args);
            output(&v)
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .stderr(Stdio::null())
                .status();
        }
    }

    const A_ADDR: &str = "198.18.1.2";
    const B_ADDR: &str = "198.18.2.2";
    const B_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
    const A_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);

    /// Client A, router R, server B; R forwards between two veth pairs. Dropping it deletes
    /// all three namespaces (the fields drop in order, each deleting its own).
    struct Topo {
        a: Netns,
        r: Netns,
        b: Netns,
    }

    static NEXT_TOPO: AtomicU32 = AtomicU32::new(0);

    impl Topo {
        fn new() -> Topo {
            let id = NEXT_TOPO.fetch_add(1, Ordering::Relaxed);
            let base = format!("qb-fwdtest-{}-{id}", std::process::id());
            let topo = Topo {
                a: Netns::create(format!("{base}a")),
                r: Netns::create(format!("{base}r")),
                b: Netns::create(format!("{base}b")),
            };
            topo.wire();
            topo
        }

        fn names(&self) -> [String; 3] {
            [
                self.a.name.clone(),
                self.r.name.clone(),
                self.b.name.clone(),
            ]
        }

        fn wire(&self) {
            let (a, r, b) = (&self.a, &self.r, &self.b);
            for ns in [a, r, b] {
                // IPv6 chatter (DAD, router solicitations) would only add noise to counts.
                ns.sysctl(&[
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ]);
                ns.ip(&["link", "set", "lo", "up"]);
            }
            a.ip(&[
                "link", "add", "a-r", "type", "veth", "peer", "name", "r-a", "netns", &r.name,
            ]);
            r.ip(&[
                "link", "add", "r-b", "type", "veth", "peer", "name", "b-r", "netns", &b.name,
            ]);
            a.ip(&["addr", "add", "198.18.1.2/24", "dev", "a-r"]);
            r.ip(&["addr", "add", "198.18.1.1/24", "dev", "r-a"]);
            r.ip(&["addr", "add", "198.18.2.1/24", "dev", "r-b"]);
            b.ip(&["addr", "add", "198.18.2.2/24", "dev", "b-r"]);
            for (ns, dev) in [(a, "a-r"), (r, "r-a"), (r, "r-b"), (b, "b-r")] {
                ns.ip(&["link", "set", dev, "up"]);
            }
            a.ip(&["route", "add", "default", "via", "198.18.1.1"]);
            b.ip(&["route", "add", "default", "via", "198.18.2.1"]);
            // `default` first so the TUNs created later inherit rp_filter=0: packets written
            // back into a TUN carry a source that the reverse path would put on a veth.
            r.sysctl(&[
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
                "net.ipv4.conf.r-a.rp_filter=0",
                "net.ipv4.conf.r-b.rp_filter=0",
                "net.ipv4.ip_forward=1",
            ]);
        }

        /// Starts one forwarder per direction in R and routes each direction through its TUN.
        fn with_forwarders(&self, up: Impairment, down: Impairment) -> (Forwarder, Forwarder) {
            let fw_up = start_forwarder(&self.r.name, "fwup", up, true);
            let fw_dn = start_forwarder(&self.r.name, "fwdn", down, true);
            self.route_through_tuns(10_000);
            (fw_up, fw_dn)
        }

        /// The router side of the delay path: each direction's packets into its TUN by policy
        /// routing; written back, they arrive with iif = the TUN and use the main table.
        fn route_through_tuns(&self, txqueuelen: u32) {
            let r = &self.r;
            for (tun, from, table) in [("fwup", "r-a", "100"), ("fwdn", "r-b", "101")] {
                r.sysctl(&[
                    &format!("net.ipv6.conf.{tun}.disable_ipv6=1"),
                    &format!("net.ipv4.conf.{tun}.rp_filter=0"),
                    &format!("net.ipv4.conf.{tun}.forwarding=1"),
                ]);
                r.ip(&["link", "set", tun, "txqueuelen", &txqueuelen.to_string()]);
                r.ip(&["link", "set", tun, "up"]);
                r.ip(&["rule", "add", "iif", from, "lookup", table]);
                r.ip(&["route", "add", "default", "dev", tun, "table", table]);
            }
        }

        fn ping(&self, args: &[&str]) -> String {
            let mut v = vec!["ping", "-n"];
            v.extend_from_slice(args);
            v.push(B_ADDR);
            String::from_utf8_lossy(&self.a.exec(&v).stdout).into_owned()
        }
    }

    fn start_forwarder(ns: &str, tun: &str, imp: Impairment, vnet_hdr: bool) -> Forwarder {
        let tun_name = tun.to_owned();
        in_ns(ns, move || {
            let t = Tun::open(&tun_name, vnet_hdr)?;
            Forwarder::start(t, imp)
        })
        .join()
        .expect("forwarder start thread panicked")
        .unwrap_or_else(|e| panic!("starting forwarder on {tun}: {e}"))
    }

    fn rtts_ms(ping_out: &str) -> Vec<f64> {
        ping_out
            .lines()
            .filter_map(|l| l.split("time=").nth(1))
            .filter_map(|t| t.split_whitespace().next())
            .filter_map(|t| t.parse().ok())
            .collect()
    }

    fn received(ping_out: &str) -> Option<u32> {
        let line = ping_out
            .lines()
            .find(|l| l.contains("packets transmitted"))?;
        let field = line.split(',').find(|f| f.contains("received"))?;
        field.split_whitespace().next()?.parse().ok()
    }

    // ---- end to end ----------------------------------------------------------------------

    #[test]
    fn tun_opens_with_offloads() {
        require_root!();
        let topo = Topo::new();
        let (with, without) = in_ns(&topo.r.name, || {
            (Tun::open("fwup", true), Tun::open("fwdn", false))
        })
        .join()
        .expect("thread");
        let (with, without) = (
            with.expect("open with vnet_hdr"),
            without.expect("open without"),
        );
        assert_eq!(with.name(), "fwup");
        assert!(with.offloads(), "this kernel should take TUNSETOFFLOAD");
        assert_ne!(with.offload_flags() & crate::tun::TUN_F_TSO4, 0);
        assert_eq!(with.vnet_hdr_len(), crate::tun::VNET_HDR_LEN);
        assert!(!without.offloads());
        assert_eq!(without.vnet_hdr_len(), 0);
    }

    #[test]
    fn ping_rtt_includes_both_delays() {
        require_root!();
        let topo = Topo::new();
        let d = imp(20, 0, false, 0.0);
        let (up, dn) = topo.with_forwarders(d, d);
        let out = topo.ping(&["-c", "5", "-i", "0.2", "-W", "2"]);
        let rtts = rtts_ms(&out);
        eprintln!("RTTS {rtts:?}");
        assert_eq!(rtts.len(), 5, "expected 5 replies:\n{out}");
        for rtt in &rtts {
            assert!(
                *rtt >= 40.0,
                "rtt {rtt} ms below the 2 x 20 ms configured:\n{out}"
            );
            assert!(*rtt < 55.0, "rtt {rtt} ms far above 40 ms:\n{out}");
        }
        let (up, dn) = (up.stop(), dn.stop());
        assert!(up.packets >= 5 && dn.packets >= 5, "up {up:?} down {dn:?}");
        assert!(up.bytes >= 5 * 84, "ICMP echo of 84 bytes each: {up:?}");
        assert_eq!(up.dropped + dn.dropped, 0);
    }

    #[test]
    fn loss_is_binomial() {
        require_root!();
        let topo = Topo::new();
        let (up, dn) = topo.with_forwarders(imp(0, 0, false, 0.5), Impairment::default());
        let n = 200u32;
        let out = topo.ping(&["-c", &n.to_string(), "-i", "0.01", "-W", "1"]);
        let got = received(&out).unwrap_or_else(|| panic!("no ping summary:\n{out}"));
        let lost = f64::from(n - got) / f64::from(n);
        let sigma = (0.25 / f64::from(n)).sqrt();
        assert!(
            (lost - 0.5).abs() <= 4.0 * sigma,
            "lost {lost} of {n} at p=0.5:\n{out}"
        );
        let (up, dn) = (up.stop(), dn.stop());
        assert_eq!(
            up.packets + up.dropped,
            u64::from(n),
            "every request passes or is dropped once: {up:?}"
        );
        assert_eq!(dn.packets, u64::from(got), "{dn:?}");
        assert_eq!(dn.dropped, 0);
    }

    const PORT: u16 = 40_000;

    /// Sends `n` numbered datagrams from A to B, 200 µs apart; returns the numbers in the order
    /// B received them (waiting up to 2 s of silence).
    fn udp_sequence(topo: &Topo, n: u32) -> Vec<u32> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let receiver = in_ns(&topo.b.name, move || {
            let sock = UdpSocket::bind(SocketAddrV4::new(B_IP, PORT)).expect("bind in B");
            sock.set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            let _ = ready_tx.send(());
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            while got.len() < n as usize {
                match sock.recv(&mut buf) {
                    Ok(4) => got.push(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]])),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            got
        });
        ready_rx.recv().expect("receiver bound");
        in_ns(&topo.a.name, move || {
            let sock = UdpSocket::bind(SocketAddrV4::new(A_IP, 0)).expect("bind in A");
            for i in 0..n {
                sock.send_to(&i.to_be_bytes(), SocketAddrV4::new(B_IP, PORT))
                    .expect("send");
                std::thread::sleep(Duration::from_micros(200));
            }
        })
        .join()
        .expect("sender");
        receiver.join().expect("receiver")
    }

    fn in_order(seq: &[u32]) -> bool {
        seq.windows(2).all(|w| w[0] < w[1])
    }

    #[test]
    fn jitter_reorders_only_when_allowed() {
        require_root!();
        let n = 200;
        for reorder in [true, false] {
            let topo = Topo::new();
            let (up, _dn) = topo.with_forwarders(imp(1, 20, reorder, 0.0), imp(1, 0, false, 0.0));
            // Resolves ARP on both hops first so no datagram waits in a neighbour queue.
            assert_eq!(received(&topo.ping(&["-c", "1", "-W", "2"])), Some(1));
            let seq = udp_sequence(&topo, n);
            let mut sorted = seq.clone();
            sorted.sort_unstable();
            assert_eq!(
                sorted,
                (0..n).collect::<Vec<_>>(),
                "reorder={reorder}: lost or duplicated datagrams"
            );
            let stats = up.stop();
            if reorder {
                assert!(
                    !in_order(&seq),
                    "jitter 20 ms with reorder=true left 200 datagrams in order"
                );
                assert!(stats.reordered > 0, "{stats:?}");
            } else {
                assert!(
                    in_order(&seq),
                    "reorder=false must keep arrival order: {seq:?}"
                );
                assert_eq!(stats.reordered, 0);
            }
        }
    }

    /// A TCP bulk transfer arrives intact, and the forwarder saw GSO super-packets: the vnet
    /// header (segmentation and checksum offload state) survived the round trip.
    #[test]
    fn tcp_super_packets_pass_intact() {
        require_root!();
        let topo = Topo::new();
        let (up, _dn) = topo.with_forwarders(imp(5, 0, false, 0.0), imp(5, 0, false, 0.0));
        const LEN: usize = 32 << 20;
        let pattern = |i: usize| (i % 251) as u8;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server = in_ns(&topo.b.name, move || -> io::Result<usize> {
            let l = std::net::TcpListener::bind(SocketAddrV4::new(B_IP, PORT))?;
            let _ = ready_tx.send(());
            let (mut c, _) = l.accept()?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            let (mut buf, mut total) = (vec![0u8; 1 << 16], 0usize);
            loop {
                let n = io::Read::read(&mut c, &mut buf)?;
                if n == 0 {
                    return Ok(total);
                }
                if let Some(bad) = (0..n).find(|&i| buf[i] != pattern(total + i)) {
                    return Err(invalid(format!("corrupt byte at offset {}", total + bad)));
                }
                total += n;
            }
        });
        ready_rx.recv().expect("listener bound");
        let data: Vec<u8> = (0..LEN).map(pattern).collect();
        in_ns(&topo.a.name, move || -> io::Result<()> {
            let mut c = std::net::TcpStream::connect_timeout(
                &SocketAddrV4::new(B_IP, PORT).into(),
                Duration::from_secs(2),
            )?;
            c.set_write_timeout(Some(Duration::from_secs(5)))?;
            io::Write::write_all(&mut c, &data)?;
            c.shutdown(std::net::Shutdown::Write)
        })
        .join()
        .expect("client thread")
        .expect("client");
        assert_eq!(server.join().expect("server thread").expect("server"), LEN);
        let up = up.stop();
        assert!(up.bytes >= LEN as u64, "{up:?}");
        assert!(
            up.bytes / up.packets > 1500,
            "no GSO super-packets reached the forwarder: {up:?}"
        );
    }

    /// UDP GSO (as QUIC stacks send) passes as super-packets and arrives as the datagrams sent.
    #[test]
    fn udp_gso_super_packets_pass_intact() {
        require_root!();
        let topo = Topo::new();
        let (up, _dn) = topo.with_forwarders(imp(1, 0, false, 0.0), imp(1, 0, false, 0.0));
        assert_eq!(received(&topo.ping(&["-c", "1", "-W", "2"])), Some(1));
        const SEG: usize = 1000;
        const SENDS: usize = 16;
        const PER_SEND: usize = 16;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let receiver = in_ns(&topo.b.name, move || {
            let sock = UdpSocket::bind(SocketAddrV4::new(B_IP, PORT)).expect("bind in B");
            sock.set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            let _ = ready_tx.send(());
            let mut sizes = Vec::new();
            let mut buf = [0u8; 65536];
            while let Ok(n) = sock.recv(&mut buf) {
                sizes.push(n);
                if sizes.len() == SENDS * PER_SEND {
                    break;
                }
            }
            sizes
        });
        ready_rx.recv().expect("receiver bound");
        in_ns(&topo.a.name, move || {
            let sock = UdpSocket::bind(SocketAddrV4::new(A_IP, 0)).expect("bind in A");
            let seg = SEG as libc::c_int;
            // SAFETY: setsockopt reads one c_int through the live pointer.
            let rc = unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_UDP,
                    libc::UDP_SEGMENT,
                    (&seg as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0, "UDP_SEGMENT: {}", io::Error::last_os_error());
            for _ in 0..SENDS {
                sock.send_to(&[7u8; SEG * PER_SEND], SocketAddrV4::new(B_IP, PORT))
                    .expect("send");
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .join()
        .expect("sender");
        let sizes = receiver.join().expect("receiver");
        assert_eq!(sizes.len(), SENDS * PER_SEND, "datagrams lost");
        assert!(
            sizes.iter().all(|&n| n == SEG),
            "datagrams resized: {sizes:?}"
        );
        let up = up.stop();
        assert!(
            up.packets < (SENDS * PER_SEND) as u64,
            "UDP GSO was segmented before the TUN: {up:?}"
        );
    }

    #[test]
    fn stop_is_prompt_and_namespaces_go_away() {
        require_root!();
        let topo = Topo::new();
        let names = topo.names();
        let (up, dn) = topo.with_forwarders(imp(5000, 0, false, 0.0), Impairment::default());
        // Datagrams that will still be queued (due in 5 s) when we stop.
        in_ns(&topo.a.name, || {
            let sock = UdpSocket::bind(SocketAddrV4::new(A_IP, 0)).expect("bind in A");
            for i in 0u32..20 {
                sock.send_to(&i.to_be_bytes(), SocketAddrV4::new(B_IP, PORT))
                    .expect("send");
            }
        })
        .join()
        .expect("sender");
        std::thread::sleep(Duration::from_millis(200));
        let running = up.stats();
        assert!(up.is_running() && dn.is_running());
        assert_eq!(running.packets, 0, "nothing is due yet: {running:?}");
        assert!(running.max_queue >= 1, "{running:?}");

        let t = Instant::now();
        let stats = up.stop();
        let idle = Instant::now();
        drop(dn);
        let (busy_stop, idle_stop) = (idle - t, idle.elapsed());
        assert!(
            busy_stop < Duration::from_millis(100),
            "stop took {busy_stop:?}"
        );
        assert!(
            idle_stop < Duration::from_millis(100),
            "idle stop took {idle_stop:?}"
        );
        assert_eq!(stats.packets, 0);
        assert!(
            stats.dropped >= 1,
            "queued packets count as dropped on stop: {stats:?}"
        );

        drop(topo);
        for n in names {
            assert!(
                !std::path::Path::new(&format!("/run/netns/{n}")).exists(),
                "{n} left behind"
            );
        }
    }

    // ---- measurement ---------------------------------------------------------------------

    fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// CPU seconds (user + system) so far of this process's threads whose name starts with
    /// `prefix`, from /proc/self/task/*/stat.
    fn thread_cpu_secs(prefix: &str) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return 0.0;
        };
        let mut ticks = 0u64;
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if !comm.starts_with(prefix) {
                continue;
            }
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
        ticks as f64 / hz
    }

    /// Throughput of one iperf3 TCP stream A -> B through both forwarders. Not a pass/fail
    /// test; run by hand:
    ///
    /// ```sh
    /// cargo test -p qbench-shaper --release --lib -- --ignored --nocapture throughput
    /// ```
    ///
    /// Knobs (environment): QB_TP_DELAYS (ms per direction, comma-separated; "0,10"),
    /// QB_TP_SECS (5), QB_TP_VNET (1 = vnet_hdr + offloads, 0 = plain 1500-byte packets),
    /// QB_TP_REVERSE (1 = iperf3 -R), QB_TP_RATE (iperf3 -b, e.g. 1G), QB_TP_TXQLEN (10000),
    /// QB_TP_BYPASS (1 = plain kernel routing, forwarders idle: the baseline),
    /// QB_TP_LINKSTATS (1 = print interface, TCP and softnet counters).
    #[test]
    #[ignore = "measurement, run by hand with --ignored --nocapture"]
    fn throughput_iperf3() {
        require_root!();
        let delays: Vec<u64> = std::env::var("QB_TP_DELAYS")
            .unwrap_or_else(|_| "0,10".into())
            .split(',')
            .filter_map(|d| d.trim().parse().ok())
            .collect();
        for delay in delays {
            measure_one(delay);
        }
    }

    fn measure_one(delay_ms: u64) {
        let secs: u32 = env_or("QB_TP_SECS", 5);
        let vnet = env_or("QB_TP_VNET", 1) == 1;
        let reverse = env_or("QB_TP_REVERSE", 0) == 1;
        let bypass = env_or("QB_TP_BYPASS", 0) == 1;
        let topo = Topo::new();
        for ns in [&topo.a, &topo.b] {
            // A 20 ms RTT at several Gbit/s needs more than the default 6 MiB receive window.
            ns.sysctl(&[
                "net.ipv4.tcp_rmem=4096 131072 33554432",
                "net.ipv4.tcp_wmem=4096 16384 33554432",
            ]);
        }
        let d = imp(delay_ms, 0, false, 0.0);
        let up = start_forwarder(&topo.r.name, "fwup", d, vnet);
        let dn = start_forwarder(&topo.r.name, "fwdn", d, vnet);
        if !bypass {
            topo.route_through_tuns(env_or("QB_TP_TXQLEN", 10_000));
        }
        assert_eq!(
            received(&topo.ping(&["-c", "1", "-W", "2"])),
            Some(1),
            "path is up"
        );

        let mut server = Command::new("ip")
            .args([
                "netns",
                "exec",
                &topo.b.name,
                "iperf3",
                "-s",
                "-1",
                "-B",
                B_ADDR,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 server");
        std::thread::sleep(Duration::from_millis(500));
        let cpu0 = thread_cpu_secs("fwd-");
        let t0 = Instant::now();
        let secs_s = secs.to_string();
        let mut client = vec!["iperf3", "-c", B_ADDR, "-B", A_ADDR, "-t", &secs_s, "-J"];
        if reverse {
            client.push("-R");
        }
        let rate = std::env::var("QB_TP_RATE").unwrap_or_default();
        if !rate.is_empty() {
            client.extend(["-b", rate.as_str()]);
        }
        let out = topo.a.exec(&client);
        let wall = t0.elapsed().as_secs_f64();
        let cpu = thread_cpu_secs("fwd-") - cpu0;
        if env_or("QB_TP_LINKSTATS", 0) == 1 {
            for ns in [&topo.a, &topo.r, &topo.b] {
                println!(
                    "{}",
                    String::from_utf8_lossy(&ns.exec(&["ip", "-s", "link"]).stdout)
                );
            }
            println!(
                "A: {}",
                String::from_utf8_lossy(&topo.a.exec(&["nstat", "-a"]).stdout)
            );
            println!(
                "{}",
                std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default()
            );
            println!(
                "B: {}",
                String::from_utf8_lossy(&topo.b.exec(&["nstat", "-a"]).stdout)
            );
        }
        let _ = server.kill();
        let _ = server.wait();
        let (up, dn) = (up.stop(), dn.stop());

        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let gbps = json["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
            / 1e9;
        let retr = json["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
        let rtt_us = json["end"]["streams"][0]["sender"]["mean_rtt"]
            .as_u64()
            .unwrap_or(0);
        println!(
            "delay {delay_ms} ms/dir, vnet_hdr {vnet}, reverse {reverse}: {gbps:.2} Gbit/s, {retr} retransmits, mean rtt {rtt_us} us"
        );
        for (dir, s) in [("up", &up), ("down", &dn)] {
            println!(
                "  {dir:4}: {} pkts ({:.0}/s), {} MB, avg {} B/pkt, dropped {}, max_queue {}",
                s.packets,
                s.packets as f64 / wall,
                s.bytes / 1_000_000,
                s.bytes.checked_div(s.packets).unwrap_or(0),
                s.dropped,
                s.max_queue
            );
        }
        println!("  forwarder threads: {cpu:.2} CPU-s over {wall:.1} s wall");
        if gbps == 0.0 {
            println!("  iperf3 said: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
