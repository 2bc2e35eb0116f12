//! Datagrams received with the kernel's receive time (`SO_TIMESTAMPNS`): a time read in user
//! space after the read moves with the receiving thread's scheduling, and on a loaded machine
//! it made a measured rate read both low and high.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Asks the kernel to stamp each datagram `s` receives with the time it arrived.
pub fn enable(s: &UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value of the right length.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `CLOCK_REALTIME` now: the clock the kernel's receive stamps are on.
pub fn realtime() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Receives one datagram (or a coalesced batch) into `buf`: its length, and the kernel's
/// receive time on [`realtime`]'s clock when the socket was [`enable`]d.
pub fn recv(s: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for the stamp and a GRO segment size, aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is valid; its pointers are set below to live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    // SAFETY: msg points at buffers that outlive the call.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the kernel filled msg's control buffer; the CMSG macros walk within it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stamp is when the datagram arrived, not when it was read: a datagram sent and
    /// delivered (loopback delivers within the send) before the read began is stamped
    /// between the send and the read, by events, not by how long anything took. The kernel
    /// turns its arrival stamps on a moment after the first socket asks (deferred work); until
    /// then it stamps at the read. So the datagram is sent again, at most 50 times, until one
    /// is stamped at its arrival: stamps taken at the read would fail every time.
    #[test]
    fn the_stamp_is_the_arrival_not_the_read() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable(&rx).unwrap();
        let mut buf = [0u8; 64];
        let mut seen = Vec::new();
        for _ in 0..50 {
            let before_send = realtime();
            tx.send_to(b"stamped", rx.local_addr().unwrap()).unwrap();
            let after_send = realtime();
            std::thread::sleep(Duration::from_millis(20));
            let before_read = realtime();
            let (n, stamp) = recv(&rx, &mut buf).unwrap();
            assert_eq!(&buf[..n], b"stamped");
            let stamp = stamp.expect("a receive stamp");
            if before_send <= stamp && stamp <= after_send && stamp < before_read {
                seen.clear();
                break;
            }
            seen.push((before_send, stamp, before_read));
        }
        assert!(seen.is_empty(), "every stamp was the read's: {seen:?}");
        // Without the option, no stamp.
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", plain.local_addr().unwrap()).unwrap();
        assert_eq!(recv(&plain, &mut buf).unwrap(), (1, None));
    }
}
