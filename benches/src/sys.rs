//! What the benches ask the kernel directly: CPU clocks, context switches, readiness.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of the whole process (all threads), from the kernel's per-process clock.
pub fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    assert_eq!(rc, 0, "getrusage");
    ru
}

/// Voluntary context switches of the whole process so far: each one a thread going to sleep
/// until something woke it.
pub fn process_wakeups() -> u64 {
    rusage(libc::RUSAGE_SELF).ru_nvcsw as u64
}

/// Minor page faults of the calling thread so far.
pub fn thread_minor_faults() -> u64 {
    rusage(libc::RUSAGE_THREAD).ru_minflt as u64
}

/// Waits until `fd` is readable; `false` once `deadline` passes.
pub fn wait_readable(fd: RawFd, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pfd` is a single valid pollfd that outlives the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc > 0 {
            return true;
        }
        if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            panic!("poll: {}", io::Error::last_os_error());
        }
    }
}

/// Sets an integer socket option.
pub fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: usize,
) -> io::Result<()> {
    let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
    // SAFETY: `value` is a live c_int for the duration of the call and the length passed
    // matches its size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Requested SO_RCVBUF / SO_SNDBUF of the socket benches: far above any round they queue.
pub const SOCKET_BUFFER: usize = 64 << 20;

/// Enlarges both socket buffers to [`SOCKET_BUFFER`] and returns the receive buffer the
/// kernel actually granted. Call it before connect/listen: TCP fixes its window scale from
/// the buffer at SYN time, and an accepted socket inherits the listener's.
///
/// The FORCE variants ignore `net.core.{r,w}mem_max` but need CAP_NET_ADMIN; without it the
/// plain options still get as close as the sysctls allow.
pub fn grow_buffers(sock: &socket2::Socket) -> usize {
    let fd = sock.as_raw_fd();
    if set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCKET_BUFFER).is_err() {
        let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    }
    if set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SOCKET_BUFFER).is_err() {
        let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    }
    sock.recv_buffer_size().expect("SO_RCVBUF")
}
