//! What the calibration's flows are made of: UDP sockets made inside a namespace, connected in
//! pairs with buffers that never drop, and the errors of making them.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use qbench_core::spec::link::Direction;

use crate::netns::{self, NetnsError};

#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("calibrating the link: {what}: {source}")]
    Socket {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("stopped by a signal while {0}")]
    Stopped(&'static str),
}

pub(super) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> CalibrateError {
    move |source| CalibrateError::Socket { what, source }
}

/// How long a receiver waits for stragglers: at least this, plus the direction's delay.
pub(super) const IDLE: Duration = Duration::from_millis(250);
pub(super) const POLL: Duration = Duration::from_millis(20);

pub(crate) fn udp_in(ns: &str, ip: &str) -> Result<UdpSocket, CalibrateError> {
    let ns = ns.to_string();
    let addr: SocketAddr = format!("{ip}:0")
        .parse()
        .map_err(|_| CalibrateError::Socket {
            what: "an address",
            source: std::io::Error::other(format!("`{ip}` is not an IPv4 address")),
        })?;
    // Threads may enter another namespace; the socket stays in the one it was made in.
    std::thread::spawn(move || -> Result<UdpSocket, CalibrateError> {
        netns::enter(&ns)?;
        let s = UdpSocket::bind(addr).map_err(io("binding a UDP socket"))?;
        s.set_read_timeout(Some(POLL))
            .map_err(io("a read timeout"))?;
        Ok(s)
    })
    .join()
    .map_err(|_| CalibrateError::Socket {
        what: "a namespace thread",
        source: std::io::Error::other("panicked"),
    })?
}

pub(super) fn set_int(
    s: &UdpSocket,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket and a c_int option value of the right length.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Buffers large enough that the sockets, not the link, are never what drops.
fn big_buffers(s: &UdpSocket) {
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        set_int(s, libc::SOL_SOCKET, opt, 32 << 20);
    }
}

pub(crate) fn one_way(d: &Direction) -> Duration {
    d.delay + d.jitter
}

/// The two ends of a measuring flow: a receiver in `to`'s namespace and a sender in `from`'s,
/// connected to it. `what` names, in errors, the receiver's address and the connecting.
pub(super) fn connected_pair(
    (to, to_ip): (&str, &str),
    (from, from_ip): (&str, &str),
    what: [&'static str; 2],
) -> Result<(UdpSocket, UdpSocket), CalibrateError> {
    let rx = udp_in(to, to_ip)?;
    let tx = udp_in(from, from_ip)?;
    // A thread held off the CPU for a moment must not turn a queue into counted losses.
    big_buffers(&rx);
    big_buffers(&tx);
    tx.connect(rx.local_addr().map_err(io(what[0]))?)
        .map_err(io(what[1]))?;
    Ok((rx, tx))
}
