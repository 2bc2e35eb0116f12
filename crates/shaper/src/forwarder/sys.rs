//! The raw system calls of the forwarder threads: the stop eventfd, poll on the TUN, and the
//! scheduler and timer-slack settings that keep departures on time.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{POLL_TIMEOUT_MS, THREAD_NICE, THREAD_SLICE};

pub(super) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd, is valid, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(super) fn signal_eventfd(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Waits until `fd` has a packet to read, the stop eventfd `wake` fires, or the timeout passes.
pub(super) fn wait_readable(fd: RawFd, wake: Option<&OwnedFd>) {
    let mut fds = [
        poll_fd(fd, libc::POLLIN),
        poll_fd(wake.map_or(-1, |f| f.as_raw_fd()), libc::POLLIN),
    ];
    // SAFETY: `fds` is a live array of two pollfd; a negative fd entry is ignored by poll.
    let _ = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_TIMEOUT_MS) };
}

pub(super) fn wait_writable(fd: RawFd) {
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

/// Runs this thread like the kernel's own packet processing would run: ahead of the
/// benchmark's processes. Without it, on a 2-core box whose cores a benchmark saturates,
/// a forwarder thread woken by its timer waits for the next scheduler tick (4 ms at HZ=250)
/// and packets leave milliseconds late (measured: RTTs +4..20 ms over the configured delay).
/// A short EEVDF slice (Linux 6.12+) lets a waking thread preempt at once; the negative nice
/// (needs CAP_SYS_NICE) keeps its share under load. Both are best effort: without them the
/// forwarder only gets less precise.
pub(super) fn tune_scheduling() {
    let mut attr = libc::sched_attr {
        size: size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: THREAD_NICE,
        sched_priority: 0,
        sched_runtime: THREAD_SLICE.as_nanos() as u64,
        sched_deadline: 0,
        sched_period: 0,
    };
    if crate::deadline::sched_setattr(&attr).is_err() {
        attr.sched_nice = 0;
        let _ = crate::deadline::sched_setattr(&attr);
    }
}

/// Makes timed waits wake within microseconds rather than the default 50 µs slack.
pub(super) fn set_timer_slack_ns(ns: libc::c_ulong) {
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
