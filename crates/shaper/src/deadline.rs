//! The kernel's deadline scheduler (`SCHED_DEADLINE`) for one thread: it runs for `runtime`
//! in every `period` and is then held off until the next, however idle the CPU is, which
//! is how a time-sliced vCPU behaves.

/// Threads this one creates start under the normal scheduler: without it the kernel refuses
/// to let a deadline thread create any (`EAGAIN`).
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

#[derive(Debug, thiserror::Error)]
pub enum DeadlineError {
    #[error("SCHED_DEADLINE refused ({0}): it needs root (CAP_SYS_NICE) and a thread allowed on every CPU (no --client-cpuset on the server's threads)")]
    Permission(std::io::Error),
    #[error("SCHED_DEADLINE refused by the kernel's admission control ({0}): with what deadline threads hold already, more CPU time than the kernel hands out")]
    Busy(std::io::Error),
    #[error("SCHED_DEADLINE: {0}")]
    Other(std::io::Error),
}

/// Puts the calling thread under the deadline scheduler: `runtime_ns` of CPU in each
/// `period_ns`, due by the period's end.
pub fn set_current(runtime_ns: u64, period_ns: u64) -> Result<(), DeadlineError> {
    let attr = libc::sched_attr {
        size: size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_DEADLINE as u32,
        sched_flags: SCHED_FLAG_RESET_ON_FORK,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: runtime_ns,
        sched_deadline: period_ns,
        sched_period: period_ns,
    };
    let mut result = sched_setattr(&attr);
    // A deadline thread that just ended keeps its bandwidth reserved until its period is
    // over: one retry after the longest period lets that go.
    if result
        .as_ref()
        .is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
    {
        std::thread::sleep(std::time::Duration::from_nanos(
            period_ns.min(1_000_000_000),
        ));
        result = sched_setattr(&attr);
    }
    result.map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => DeadlineError::Permission(e),
        Some(libc::EBUSY) => DeadlineError::Busy(e),
        _ => DeadlineError::Other(e),
    })
}

/// `sched_setattr(2)` on the calling thread; libc has no wrapper for it.
pub(crate) fn sched_setattr(attr: &libc::sched_attr) -> std::io::Result<()> {
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
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Thread `tid`'s deadline runtime and period in ns, as the kernel holds them; `None` when
/// it is not under the deadline scheduler (or is gone).
pub fn of_thread(tid: i32) -> Option<(u64, u64)> {
    // SAFETY: a zeroed sched_attr is a valid value of the plain-data struct.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `attr` is writable for the size passed; the kernel fills at most that.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut libc::sched_attr,
            size_of::<libc::sched_attr>() as u32,
            0,
        )
    };
    (rc == 0 && attr.sched_policy == libc::SCHED_DEADLINE as u32)
        .then_some((attr.sched_runtime, attr.sched_period))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::gettid;

    #[test]
    fn a_thread_under_the_deadline_scheduler_reads_back_its_runtime_and_period() {
        let (got, child) = std::thread::spawn(|| {
            let set = set_current(2_000_000, 10_000_000);
            let got = of_thread(gettid());
            // A thread it creates runs under the normal scheduler.
            let child = std::thread::spawn(|| of_thread(gettid())).join().unwrap();
            set.map(|()| (got, child))
        })
        .join()
        .unwrap()
        .expect("root may use SCHED_DEADLINE");
        assert_eq!(got, Some((2_000_000, 10_000_000)));
        assert_eq!(child, None);
        assert_eq!(of_thread(gettid()), None);
    }

    #[test]
    fn a_runtime_beyond_its_period_is_refused() {
        let r = std::thread::spawn(|| set_current(20_000_000, 10_000_000))
            .join()
            .unwrap();
        assert!(matches!(
            r,
            Err(DeadlineError::Other(_) | DeadlineError::Permission(_))
        ));
    }
}
