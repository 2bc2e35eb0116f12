//! A CPU taken away for part of every period, as a hypervisor takes a vCPU's physical core
//! for another guest: a real-time thread pinned to the CPU spins for its part of each period,
//! so that whatever else is pinned there waits, however little it has to do. A quota (CFS or
//! deadline) holds back only a thread that uses up its share; a descheduled vCPU holds back
//! everything on it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum StealError {
    #[error("pinning the stealing thread to CPU {cpu}: {source}")]
    Pin { cpu: u16, source: std::io::Error },
    #[error("SCHED_FIFO for the stealing thread ({0}): it needs root (CAP_SYS_NICE)")]
    Priority(std::io::Error),
    #[error("the stealing thread did not start")]
    Start,
}

/// What the stealer took so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stolen {
    pub periods: u64,
    pub busy_ns: u64,
    /// The stealing thread's own CPU time: it runs in the benchmark's process, and is
    /// neither its client nor its server.
    pub cpu_ns: u64,
}

/// What the stealing thread and its owner share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// How many runs want the CPU taken now: the sides of a comparison take turns, and
    /// a competition's flows run at once, all on one stealer.
    active: AtomicUsize,
    periods: AtomicU64,
    busy_ns: AtomicU64,
    cpu_ns: AtomicU64,
}

/// Spins on `cpu` for `busy` of every `period` while resumed, until dropped.
pub struct Stealer {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn realtime() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is valid for the call; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's CPU time, in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for writing; the clock is the calling thread's.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

impl Stealer {
    /// Starts the thread, paused; an error when it cannot be pinned or made real-time (then
    /// nothing is stolen and the thread is gone).
    pub fn start(cpu: u16, busy: Duration, period: Duration) -> Result<Self, StealError> {
        let shared = Arc::new(Shared::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("qbench-steal".into())
            .spawn(move || {
                let ready = crate::affinity::pin_current(&[cpu])
                    .map_err(|source| StealError::Pin { cpu, source })
                    .and_then(|()| realtime().map_err(StealError::Priority));
                let failed = ready.is_err();
                let _ = tx.send(ready);
                if !failed {
                    spin(&s, busy, period);
                }
            })
            .map_err(|_| StealError::Start)?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Self {
                shared,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(StealError::Start),
        }
    }

    /// One more run wants the CPU taken, from the next period on.
    pub fn resume(&self) {
        self.shared.active.fetch_add(1, Ordering::SeqCst);
    }

    /// One run less wants it.
    pub fn pause(&self) {
        let _ = self
            .shared
            .active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Whether the stealing thread still runs.
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    pub fn stolen(&self) -> Stolen {
        let s = &self.shared;
        Stolen {
            periods: s.periods.load(Ordering::Relaxed),
            busy_ns: s.busy_ns.load(Ordering::Relaxed),
            cpu_ns: s.cpu_ns.load(Ordering::Relaxed),
        }
    }
}

/// Each period: spin for `busy` from its start while resumed, then sleep to the next one's
/// start. Periods are laid on one grid from the first, so that a late wake-up does not shift
/// the rest.
fn spin(s: &Shared, busy: Duration, period: Duration) {
    let origin = Instant::now();
    let period_ns = period.as_nanos().max(1) as u64;
    let at = |k: u64| origin + Duration::from_nanos(period_ns.saturating_mul(k));
    let mut k: u64 = 0;
    while !s.stop.load(Ordering::Relaxed) {
        let start = at(k);
        let now = Instant::now();
        if now < start {
            std::thread::sleep(start - now);
        }
        if s.active.load(Ordering::SeqCst) > 0 {
            // Counted as it begins: a run that ends mid-spin was stopped in this period.
            s.periods.fetch_add(1, Ordering::Relaxed);
            let began = Instant::now();
            while Instant::now() < start + busy {
                std::hint::spin_loop();
            }
            s.busy_ns
                .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
            s.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        }
        // A wake-up later than a whole period skips the periods it missed.
        let behind = (Instant::now() - origin).as_nanos() as u64 / period_ns;
        k = behind.saturating_add(1).max(k.saturating_add(1));
    }
}

impl Drop for Stealer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts, not timing: the stealer took periods and spun in them, and stops when dropped.
    #[test]
    fn a_stealer_spins_in_its_periods_and_stops_when_dropped() {
        let cpu = 0;
        let s = Stealer::start(cpu, Duration::from_millis(2), Duration::from_millis(10))
            .expect("root may run a SCHED_FIFO thread");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(s.stolen().periods, 0, "paused until resumed");
        s.resume();
        std::thread::sleep(Duration::from_millis(100));
        s.pause();
        assert!(s.running());
        let seen = s.stolen();
        assert!(seen.periods >= 1 && seen.busy_ns > 0, "{seen:?}");
        assert!(seen.cpu_ns > 0, "{seen:?}");
        drop(s);
    }
}
