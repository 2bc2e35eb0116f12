//! A CPU taken away for part of every period, as a hypervisor takes a vCPU's physical core
//! for another guest: a real-time thread pinned to the CPU spins for its part of each period,
//! so that whatever else is pinned there waits, however little it has to do. A quota (CFS or
//! deadline) holds back only a thread that uses up its share; a descheduled vCPU holds back
//! everything on it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
}

/// Spins on `cpu` for `busy` of every `period` until dropped.
pub struct Stealer {
    stop: Arc<AtomicBool>,
    periods: Arc<AtomicU64>,
    busy_ns: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn pin(cpu: u16) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within CPU_SETSIZE (the
    // caller's CPU came from this process's own affinity mask).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(usize::from(cpu), &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 is the calling thread.
    if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn realtime() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is valid for the call; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Stealer {
    /// Starts the thread; an error when it cannot be pinned or made real-time (then nothing
    /// is stolen and the thread is gone).
    pub fn start(cpu: u16, busy: Duration, period: Duration) -> Result<Self, StealError> {
        let stop = Arc::new(AtomicBool::new(false));
        let periods = Arc::new(AtomicU64::new(0));
        let busy_ns = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, p, b) = (stop.clone(), periods.clone(), busy_ns.clone());
        let thread = std::thread::Builder::new()
            .name("qbench-steal".into())
            .spawn(move || {
                let ready = pin(cpu)
                    .map_err(|source| StealError::Pin { cpu, source })
                    .and_then(|()| realtime().map_err(StealError::Priority));
                let failed = ready.is_err();
                let _ = tx.send(ready);
                if !failed {
                    spin(&s, &p, &b, busy, period);
                }
            })
            .map_err(|_| StealError::Start)?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Self {
                stop,
                periods,
                busy_ns,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(StealError::Start),
        }
    }

    pub fn stolen(&self) -> Stolen {
        Stolen {
            periods: self.periods.load(Ordering::Relaxed),
            busy_ns: self.busy_ns.load(Ordering::Relaxed),
        }
    }
}

/// Each period: spin for `busy` from its start, then sleep to the next one's start. Periods
/// are laid on one grid from the first, so that a late wake-up does not shift the rest.
fn spin(
    stop: &AtomicBool,
    periods: &AtomicU64,
    busy_ns: &AtomicU64,
    busy: Duration,
    period: Duration,
) {
    let origin = Instant::now();
    let mut k: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        let start = origin + period * k;
        let now = Instant::now();
        if now < start {
            std::thread::sleep(start - now);
        }
        let began = Instant::now();
        let until = start + busy;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        busy_ns.fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        periods.fetch_add(1, Ordering::Relaxed);
        // A wake-up later than a whole period skips the periods it missed.
        let behind = (Instant::now() - origin).as_nanos() / period.as_nanos().max(1);
        k = u32::try_from(behind)
            .unwrap_or(u32::MAX)
            .saturating_add(1)
            .max(k + 1);
    }
}

impl Drop for Stealer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
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
        std::thread::sleep(Duration::from_millis(100));
        let seen = s.stolen();
        assert!(seen.periods >= 1 && seen.busy_ns > 0, "{seen:?}");
        drop(s);
    }
}
