//! CPU time of this whole process, from `getrusage` (microseconds); the in-process server
//! accounts for its own threads, and the client's share is the difference.

use qbench_core::CpuTimes;

/// CPU time of the whole process so far.
pub fn process_cpu() -> CpuTimes {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return CpuTimes::default();
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    CpuTimes {
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
    }
}
