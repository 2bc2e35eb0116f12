//! Socket options the socket crates do not name (UDP_GRO, TCP_WINDOW_CLAMP, a reuseport
//! group's BPF program), set through one checked call.

use std::io;
use std::os::fd::AsRawFd;

/// `setsockopt(sock, level, name, value)`, with `value`'s own size.
pub fn set<T>(
    sock: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a live `T` for the call, and the length given is `T`'s; the kernel
    // copies what it reads and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
