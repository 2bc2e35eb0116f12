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

/// Asks for a buffer of `bytes` with `forced` (past the host's limit, root) or else `plain`
/// (up to it).
fn force_buffer(
    sock: &impl AsRawFd,
    forced: libc::c_int,
    plain: libc::c_int,
    bytes: u64,
) -> io::Result<()> {
    let n = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    match set(sock, libc::SOL_SOCKET, forced, &n) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => set(sock, libc::SOL_SOCKET, plain, &n),
        other => other,
    }
}

fn buffer(sock: &impl AsRawFd, opt: libc::c_int) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `n` and `len` are live for the call and `len` is `n`'s size; the kernel writes
    // at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&mut n as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Asks for a receive buffer of `bytes`: past `net.core.rmem_max` where this process may
/// (SO_RCVBUFFORCE, root), else up to it (SO_RCVBUF). What the kernel granted is
/// [`receive_buffer`]'s to say.
pub fn force_receive_buffer(sock: &impl AsRawFd, bytes: u64) -> io::Result<()> {
    force_buffer(sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, bytes)
}

/// As [`force_receive_buffer`], the send buffer (`net.core.wmem_max`, SO_SNDBUFFORCE).
pub fn force_send_buffer(sock: &impl AsRawFd, bytes: u64) -> io::Result<()> {
    force_buffer(sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, bytes)
}

/// The receive buffer the kernel granted `sock`, in bytes (twice what was asked, capped).
pub fn receive_buffer(sock: &impl AsRawFd) -> io::Result<u64> {
    buffer(sock, libc::SO_RCVBUF)
}

/// The receive and send buffers the kernel granted `sock`, in bytes.
pub fn buffers(sock: &impl AsRawFd) -> io::Result<(u64, u64)> {
    Ok((
        buffer(sock, libc::SO_RCVBUF)?,
        buffer(sock, libc::SO_SNDBUF)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel grants twice what was asked: up to `net.core.rmem_max` for anyone, past it
    /// as root.
    #[test]
    fn a_receive_buffer_is_granted_as_asked_past_the_hosts_limit_only_as_root() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        force_receive_buffer(&s, 16 << 10).unwrap();
        assert_eq!(receive_buffer(&s).unwrap(), 32 << 10);
        let max: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        force_receive_buffer(&s, 2 * max).unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let want = if root { 4 * max } else { 2 * max };
        assert_eq!(receive_buffer(&s).unwrap(), want);
    }

    #[test]
    fn a_send_buffer_is_granted_twice_the_ask() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        force_send_buffer(&s, 16 << 10).unwrap();
        assert_eq!(buffers(&s).unwrap().1, 32 << 10);
    }
}
