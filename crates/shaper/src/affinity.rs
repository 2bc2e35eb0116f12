//! Which CPUs a thread runs on, and its kernel id: the pieces the CPU limits (the client's
//! quota and cpuset, the stolen server CPU) and the threads they pin share.

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Pins the calling thread to `cpus` (those past CPU_SETSIZE left out). Async-signal-safe:
/// it runs between fork and exec too.
pub fn pin_current(cpus: &[u16]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus
        .iter()
        .filter(|&&c| (c as usize) < libc::CPU_SETSIZE as usize)
    {
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    let size = size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; 0 means the calling thread.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs thread `tid` may run on (0: the calling thread); empty when it cannot be read.
pub fn of_thread(tid: i32) -> Vec<u16> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it for that thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_getaffinity(tid, size, &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .filter_map(|c| u16::try_from(c).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_reads_back_its_cpu() {
        let first = *of_thread(0).first().expect("this thread runs somewhere");
        let got = std::thread::spawn(move || {
            pin_current(&[first]).unwrap();
            of_thread(gettid())
        })
        .join()
        .unwrap();
        assert_eq!(got, [first]);
    }
}
