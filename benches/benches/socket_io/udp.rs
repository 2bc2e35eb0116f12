//! The UDP socket pair of the `udp_send` and `udp_recv` benches: quinn-udp and raw
//! `sendmmsg`/`recvmsg` on one pair of loopback sockets.

use std::io::{self, IoSliceMut};
use std::mem::{self, MaybeUninit};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{collect, grow_buffers, set_int_opt};
use super::{DATAGRAM, LOCALHOST, MAX_UDP_PAYLOAD, MMSG_BATCH, QUINN_GSO_SEGMENTS};
use super::{UDP_ROUND, UDP_TRUESIZE};

/// How many segments a GSO send carries.
#[derive(Clone, Copy)]
pub(super) enum Gso {
    /// As quinn sends: what the cost model uses.
    Quinn,
    /// As many as one send can carry: the floor of the per-datagram cost.
    Max,
}

/// Number of full-size datagrams in what one quinn-udp `recv` returned.
fn datagrams(meta: &[RecvMeta]) -> usize {
    meta.iter()
        .map(|m| {
            assert!(
                m.stride == DATAGRAM && m.len % DATAGRAM == 0,
                "unexpected message: len {} stride {}",
                m.len,
                m.stride
            );
            m.len / DATAGRAM
        })
        .sum()
}

/// One datagram through a bare `recvmsg`: source address only, no control messages.
fn recvmsg_one(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut name = MaybeUninit::<libc::sockaddr_storage>::uninit();
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is a plain C struct for which all-zero bytes are a valid value.
    let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
    hdr.msg_name = name.as_mut_ptr().cast();
    hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    loop {
        // SAFETY: `hdr` points at `name` and at `iov`, which covers `buf`; all three are live
        // and exclusively borrowed for the call, and their sizes are the ones given.
        let n = unsafe { libc::recvmsg(fd, &mut hdr, 0) };
        if n >= 0 {
            assert!(
                n as usize == DATAGRAM && hdr.msg_flags & libc::MSG_TRUNC == 0,
                "recvmsg: unexpected datagram of {n} bytes, flags {:#x}",
                hdr.msg_flags
            );
            return Ok(1);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sends `count` datagrams in `sendmmsg` calls of up to `MMSG_BATCH` messages.
fn sendmmsg_all(fd: RawFd, dst: &SockAddr, payload: &[u8], mut count: usize) {
    while count > 0 {
        let batch = count.min(MMSG_BATCH);
        // SAFETY: iovec and mmsghdr are plain C structs for which all-zero bytes are valid.
        let mut iovs: [libc::iovec; MMSG_BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; MMSG_BATCH] = unsafe { mem::zeroed() };
        for (hdr, iov) in hdrs.iter_mut().zip(iovs.iter_mut()).take(batch) {
            // sendmmsg only reads the payload and address; the `*mut` is the C signature.
            iov.iov_base = payload.as_ptr() as *mut libc::c_void;
            iov.iov_len = DATAGRAM;
            hdr.msg_hdr.msg_name = dst.as_ptr() as *mut libc::c_void;
            hdr.msg_hdr.msg_namelen = dst.len();
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
        }
        let mut sent = 0;
        while sent < batch {
            let rest = &mut hdrs[sent..batch];
            // SAFETY: `rest` holds `rest.len()` initialised headers whose iovecs, payload and
            // address all outlive the call; the kernel writes only each header's `msg_len`.
            let n = unsafe { libc::sendmmsg(fd, rest.as_mut_ptr(), rest.len() as libc::c_uint, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                panic!("sendmmsg: {e}");
            }
            sent += n as usize;
        }
        count -= batch;
    }
}

/// How the receiving socket of a [`UdpPair`] is set up.
#[derive(Clone, Copy)]
pub(super) enum Receiver {
    /// A bare socket: no quinn-udp options, GRO off.
    Plain,
    /// A quinn-udp socket with GRO turned back off.
    Quinn,
    /// A quinn-udp socket as quinn-udp leaves it, GRO on, fed by GSO sends of this size.
    QuinnGro(Gso),
}

pub(super) struct UdpPair {
    tx: UdpSocket,
    tx_state: UdpSocketState,
    rx: UdpSocket,
    /// Present for quinn-udp receivers; drains always go through it when it is.
    rx_state: Option<UdpSocketState>,
    dst: SocketAddr,
    dst_addr: SockAddr,
    /// Datagrams per round, sized to what the receive buffer can hold.
    pub(super) round: usize,
    payload: Vec<u8>,
    /// Backing store for quinn-udp receive buffers.
    rx_bufs: Vec<u8>,
}

fn udp_socket() -> (UdpSocket, usize) {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("UDP socket");
    let rcvbuf = grow_buffers(&sock);
    sock.bind(&SocketAddr::from((LOCALHOST, 0)).into())
        .expect("bind UDP socket to 127.0.0.1");
    (sock.into(), rcvbuf)
}

impl UdpPair {
    pub(super) fn new(receiver: Receiver) -> Self {
        let (tx, _) = udp_socket();
        let tx_state = UdpSocketState::new(UdpSockRef::from(&tx)).expect("quinn-udp state");
        let (rx, rcvbuf) = udp_socket();
        let rx_state = match receiver {
            Receiver::Plain => {
                rx.set_nonblocking(true).expect("non-blocking");
                None
            }
            Receiver::Quinn | Receiver::QuinnGro(_) => {
                Some(UdpSocketState::new(UdpSockRef::from(&rx)).expect("quinn-udp state"))
            }
        };
        if !matches!(receiver, Receiver::QuinnGro(_)) {
            set_int_opt(rx.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 0).expect("disable GRO");
        } else if rx_state.as_ref().is_some_and(|s| s.gro_segments() <= 1) {
            panic!("UDP GRO is unavailable on this kernel (quinn-udp gro_segments() == 1)");
        }
        let dst = rx.local_addr().expect("local address");
        let round = (rcvbuf / UDP_TRUESIZE).clamp(MMSG_BATCH, UDP_ROUND);
        Self {
            tx,
            tx_state,
            rx,
            rx_state,
            dst,
            dst_addr: dst.into(),
            round,
            payload: vec![0x5a; MAX_UDP_PAYLOAD],
            rx_bufs: vec![0; MMSG_BATCH * MAX_UDP_PAYLOAD],
        }
    }

    /// Segments per GSO send: `want`, within quinn-udp's limit and the IPv4 length field.
    pub(super) fn gso_segments(&self, want: Gso) -> usize {
        let max = self.tx_state.max_gso_segments();
        assert!(
            max > 1,
            "UDP GSO is unavailable on this kernel (quinn-udp max_gso_segments() == {max})"
        );
        let cap = max.min(MAX_UDP_PAYLOAD / DATAGRAM);
        match want {
            Gso::Quinn => QUINN_GSO_SEGMENTS.min(cap),
            Gso::Max => cap,
        }
    }

    fn quinn_send(&self, contents: &[u8], segment_size: Option<usize>) {
        let transmit = Transmit {
            destination: self.dst,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        // quinn-udp logs and swallows every error but WouldBlock; a swallowed one shows up
        // as a short count in the drain.
        if let Err(e) = self.tx_state.send(UdpSockRef::from(&self.tx), &transmit) {
            panic!("quinn-udp send: {e} (send buffer too small?)");
        }
    }

    pub(super) fn send_sendmsg(&self, count: usize) {
        let datagram = &self.payload[..DATAGRAM];
        for _ in 0..count {
            self.quinn_send(datagram, None);
        }
    }

    pub(super) fn send_sendmmsg(&self, count: usize) {
        sendmmsg_all(self.tx.as_raw_fd(), &self.dst_addr, &self.payload, count);
    }

    pub(super) fn send_gso(&self, segments: usize, mut count: usize) {
        while count > 0 {
            let n = count.min(segments);
            self.quinn_send(&self.payload[..n * DATAGRAM], Some(DATAGRAM));
            count -= n;
        }
    }

    /// Receives exactly `expected` datagrams through quinn-udp; returns the time spent.
    pub(super) fn recv_quinn(&mut self, expected: usize, what: &str) -> Duration {
        let state = self.rx_state.as_ref().expect("quinn-udp receiver");
        let rx = &self.rx;
        let mut bufs: Vec<IoSliceMut<'_>> = self
            .rx_bufs
            .chunks_mut(MAX_UDP_PAYLOAD)
            .map(IoSliceMut::new)
            .collect();
        let mut meta = [RecvMeta::default(); MMSG_BATCH];
        collect(rx.as_raw_fd(), expected, what, || {
            let msgs = state.recv(UdpSockRef::from(rx), &mut bufs, &mut meta)?;
            Ok(datagrams(&meta[..msgs]))
        })
    }

    pub(super) fn recv_plain(&mut self, expected: usize, what: &str) -> Duration {
        let fd = self.rx.as_raw_fd();
        let buf = &mut self.rx_bufs[..MAX_UDP_PAYLOAD];
        collect(fd, expected, what, || recvmsg_one(fd, buf))
    }

    /// Fails if anything is left over, i.e. more arrived than the rounds accounted for.
    pub(super) fn assert_empty(&mut self) {
        let mut buf = [0u8; 1];
        match self.rx.recv(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => panic!("receive queue not empty after the benchmark: {other:?}"),
        }
    }
}
