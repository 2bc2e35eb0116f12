//! Kernel socket I/O cost per datagram and per byte on loopback (127.0.0.1): UDP through
//! quinn-udp (and raw `sendmmsg`/`recvmsg` for comparison) against TCP.
//!
//! Everything runs on one thread with non-blocking sockets. A cross-thread wakeup costs
//! 25-50 us on the VMs this runs on, which would swamp the 1-10 us a syscall costs, so no
//! benchmark ever waits for another thread. Instead each round goes through two phases:
//! a batch is sent into the receiving socket's queue, then drained from it on the same
//! thread. `iter_custom` times only the phase under test and the other one runs untimed:
//! - `udp_send/*`, `tcp_write/*`: the send calls are timed, the drain is not;
//! - `udp_recv/*`, `tcp_read/*`: the fill is untimed, the receive calls are timed.
//!
//! One iteration is one 1452-byte datagram for UDP (a full QUIC packet at a 1500-byte path
//! MTU) and one 64 KiB `write`/`read` for TCP, so the throughput lines compare directly.
//!
//! Loopback has no device queue to defer to: the send syscall itself carries the packet
//! through IP, the loopback device and the receiving socket's demultiplexing, up to the
//! moment it is queued on the receiver. The send side therefore pays for most of the
//! kernel's work, the receive side only for dequeueing and copying out. The two numbers are
//! not symmetric and only their sum approximates the cost of one datagram (or byte)
//! crossing a real pair of hosts; read `udp_send/X` together with the matching
//! `udp_recv/Y`.
//!
//! - `udp_send/sendmsg`: quinn-udp, one datagram per `sendmsg` (with quinn's ECN cmsg).
//! - `udp_send/sendmmsg`: raw `sendmmsg` of 32 datagrams per call, no cmsgs; quinn-udp
//!   never uses `sendmmsg` on Linux, this shows what batching without GSO would buy.
//! - `udp_send/gso`: quinn-udp with `UDP_SEGMENT`, ten 1452-byte segments per call as quinn
//!   sends them; `udp_send/gso-max` as many as fit in one IPv4 datagram (45; see
//!   [`MAX_UDP_PAYLOAD`]).
//! - `udp_recv/recvmsg`: the minimal receiver, one `recvmsg` per datagram, no cmsgs.
//! - `udp_recv/recvmmsg`: quinn-udp's receive path (`recvmmsg`, 32 messages per call, ECN
//!   and packet-info cmsgs) with GRO turned off.
//! - `udp_recv/gro`, `udp_recv/gro-max`: the same with GRO on and a GSO sender (10 or 45
//!   segments), so each message carries a whole GSO send.
//! - `tcp_write/65536`, `tcp_read/65536`: a connected loopback pair with `TCP_NODELAY`.
//!
//! Rounds are deliberately larger than L2 (1440 datagrams, about 3.5 MiB of kernel memory;
//! 4 MiB for TCP), so the drain reads data that has left the writer's private caches, much
//! as it would have after crossing to another core. Rounds that stay in L2 make the receive
//! side look cheaper (about 0.75 us per `recvmsg` with 160-datagram rounds, against 0.9-1.7 us
//! with these, on a 2-vCPU EPYC VM); keep that in mind before shrinking them.
//!
//! In the `udp_send` benchmarks the receiver is a default quinn-udp socket (GRO on), as a
//! QUIC peer would be: that lets a GSO send reach the receive queue as one buffer instead
//! of being split on the sender's syscall. Every drain checks that exactly the number of
//! datagrams or bytes sent arrived, so a full receive buffer panics instead of turning
//! into a silently faster benchmark.

use std::io::{self, IoSliceMut, Read, Write};
use std::mem::{self, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use criterion::{measurement::WallTime, Throughput};
use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// A full-size QUIC datagram at a 1500-byte path MTU over IPv6 (1500 - 40 - 8).
const DATAGRAM: usize = 1452;
/// Messages per `sendmmsg` call and receive buffers per quinn-udp `recv`: quinn-udp's own
/// `BATCH_SIZE` (it hands at most 32 headers to `recvmmsg` on Linux), so both batched paths
/// batch alike.
const MMSG_BATCH: usize = 32;
/// The IPv4 total-length field bounds a whole GSO send, not just each segment: 64 segments of
/// 1452 bytes (quinn-udp's `max_gso_segments()`) fail with EMSGSIZE, which quinn-udp's `send`
/// swallows, so the batch would vanish without an error.
const MAX_UDP_PAYLOAD: usize = 65_535 - 20 - 8;
/// Segments quinn puts in one GSO send (its connection driver's `MAX_TRANSMIT_SEGMENTS`).
const QUINN_GSO_SEGMENTS: usize = 10;

/// How many segments a GSO send carries.
#[derive(Clone, Copy)]
enum Gso {
    /// As quinn sends: what the cost model uses.
    Quinn,
    /// As many as one send can carry: the floor of the per-datagram cost.
    Max,
}

/// Datagrams per round: a multiple of both the 32-message batch and the 45-segment GSO send,
/// and of quinn's 10-segment send, so every round ends on whole batches. About 2 MiB of payload, 3.5 MiB of kernel memory.
const UDP_ROUND: usize = 1440;
/// Kernel memory one queued 1452-byte datagram is charged (skb head plus data), rounded up;
/// only used to shrink rounds when the buffers could not be enlarged.
const UDP_TRUESIZE: usize = 4096;
/// One TCP iteration: a 64 KiB application write or read.
const TCP_CHUNK: usize = 65_536;
/// Writes per TCP round (4 MiB), well inside the enlarged buffers and receive window.
const TCP_ROUND: usize = 64;
/// Requested SO_RCVBUF / SO_SNDBUF; far above any round so that no batch can overflow.
const SOCKET_BUFFER: usize = 64 << 20;
/// Loopback delivers within the send syscall; anything missing after this long was dropped.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const LOCALHOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
    // SAFETY: `value` is a live c_int for the duration of the call and the length passed
    // matches its size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Enlarges both socket buffers and returns the receive buffer the kernel actually granted.
///
/// The FORCE variants ignore `net.core.{r,w}mem_max` but need CAP_NET_ADMIN; without it the
/// plain options still get as close as the sysctls allow, and rounds shrink to match.
fn grow_buffers(sock: &Socket) -> usize {
    let fd = sock.as_raw_fd();
    if set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCKET_BUFFER).is_err() {
        let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    }
    if set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SOCKET_BUFFER).is_err() {
        let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    }
    sock.recv_buffer_size().expect("SO_RCVBUF")
}

/// Waits until `fd` is readable; `false` once `deadline` passes.
fn wait_readable(fd: RawFd, deadline: Instant) -> bool {
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

/// Calls `recv` until it has returned `expected` units in total and returns the time spent in
/// those calls.
///
/// Loopback normally queues a datagram before its send returns, but softirq work can be
/// deferred to ksoftirqd; time spent waiting for such stragglers is taken out.
fn collect(
    fd: RawFd,
    expected: usize,
    what: &str,
    mut recv: impl FnMut() -> io::Result<usize>,
) -> Duration {
    let mut got = 0;
    let mut idle = Duration::ZERO;
    let start = Instant::now();
    while got < expected {
        match recv() {
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let wait = Instant::now();
                if !wait_readable(fd, wait + DRAIN_TIMEOUT) {
                    panic!(
                        "{what}: received {got} of {expected} after {DRAIN_TIMEOUT:?}; \
                         the rest was dropped (receive buffer too small?)"
                    );
                }
                idle += wait.elapsed();
            }
            Err(e) => panic!("{what}: receive failed: {e}"),
        }
    }
    let spent = start.elapsed().saturating_sub(idle);
    assert_eq!(
        got, expected,
        "{what}: received more than was sent in this round"
    );
    spent
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
    hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
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
enum Receiver {
    /// A bare socket: no quinn-udp options, GRO off.
    Plain,
    /// A quinn-udp socket with GRO turned back off.
    Quinn,
    /// A quinn-udp socket as quinn-udp leaves it, GRO on, fed by GSO sends of this size.
    QuinnGro(Gso),
}

struct UdpPair {
    tx: UdpSocket,
    tx_state: UdpSocketState,
    rx: UdpSocket,
    /// Present for quinn-udp receivers; drains always go through it when it is.
    rx_state: Option<UdpSocketState>,
    dst: SocketAddr,
    dst_addr: SockAddr,
    /// Datagrams per round, sized to what the receive buffer can hold.
    round: usize,
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
    fn new(receiver: Receiver) -> Self {
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
    fn gso_segments(&self, want: Gso) -> usize {
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

    fn send_sendmsg(&self, count: usize) {
        let datagram = &self.payload[..DATAGRAM];
        for _ in 0..count {
            self.quinn_send(datagram, None);
        }
    }

    fn send_sendmmsg(&self, count: usize) {
        sendmmsg_all(self.tx.as_raw_fd(), &self.dst_addr, &self.payload, count);
    }

    fn send_gso(&self, segments: usize, mut count: usize) {
        while count > 0 {
            let n = count.min(segments);
            self.quinn_send(&self.payload[..n * DATAGRAM], Some(DATAGRAM));
            count -= n;
        }
    }

    /// Receives exactly `expected` datagrams through quinn-udp; returns the time spent.
    fn recv_quinn(&mut self, expected: usize, what: &str) -> Duration {
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

    fn recv_plain(&mut self, expected: usize, what: &str) -> Duration {
        let fd = self.rx.as_raw_fd();
        let buf = &mut self.rx_bufs[..MAX_UDP_PAYLOAD];
        collect(fd, expected, what, || recvmsg_one(fd, buf))
    }

    /// Fails if anything is left over, i.e. more arrived than the rounds accounted for.
    fn assert_empty(&mut self) {
        let mut buf = [0u8; 1];
        match self.rx.recv(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => panic!("receive queue not empty after the benchmark: {other:?}"),
        }
    }
}

#[derive(Clone, Copy)]
enum SendMode {
    Sendmsg,
    Sendmmsg,
    Gso(Gso),
}

fn udp_send(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.throughput(Throughput::Bytes(DATAGRAM as u64));
    for (param, mode) in [
        ("sendmsg", SendMode::Sendmsg),
        ("sendmmsg", SendMode::Sendmmsg),
        ("gso", SendMode::Gso(Gso::Quinn)),
        ("gso-max", SendMode::Gso(Gso::Max)),
    ] {
        let mut pair = UdpPair::new(Receiver::QuinnGro(Gso::Quinn));
        let segments = match mode {
            SendMode::Gso(g) => pair.gso_segments(g),
            SendMode::Sendmsg | SendMode::Sendmmsg => 1,
        };
        group.bench_function(BenchmarkId::new("udp_send", param), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(pair.round);
                    let start = Instant::now();
                    match mode {
                        SendMode::Sendmsg => pair.send_sendmsg(n),
                        SendMode::Sendmmsg => pair.send_sendmmsg(n),
                        SendMode::Gso(_) => pair.send_gso(segments, n),
                    }
                    total += start.elapsed();
                    pair.recv_quinn(n, "udp_send drain");
                    left -= n;
                }
                total
            })
        });
        pair.assert_empty();
    }
}

fn udp_recv(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.throughput(Throughput::Bytes(DATAGRAM as u64));
    for (param, receiver) in [
        ("recvmsg", Receiver::Plain),
        ("recvmmsg", Receiver::Quinn),
        ("gro", Receiver::QuinnGro(Gso::Quinn)),
        ("gro-max", Receiver::QuinnGro(Gso::Max)),
    ] {
        let mut pair = UdpPair::new(receiver);
        let segments = match receiver {
            Receiver::QuinnGro(g) => pair.gso_segments(g),
            Receiver::Plain | Receiver::Quinn => 1,
        };
        let what = format!("udp_recv/{param}");
        group.bench_function(BenchmarkId::new("udp_recv", param), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(pair.round);
                    total += match receiver {
                        Receiver::Plain => {
                            pair.send_sendmmsg(n);
                            pair.recv_plain(n, &what)
                        }
                        Receiver::Quinn => {
                            pair.send_sendmmsg(n);
                            pair.recv_quinn(n, &what)
                        }
                        // Coalescing on loopback happens only for GSO sends; there is no
                        // NAPI GRO on the loopback device.
                        Receiver::QuinnGro(_) => {
                            pair.send_gso(segments, n);
                            pair.recv_quinn(n, &what)
                        }
                    };
                    left -= n;
                }
                total
            })
        });
        pair.assert_empty();
    }
}

struct TcpPair {
    tx: TcpStream,
    rx: TcpStream,
    chunk: Vec<u8>,
    sink: Vec<u8>,
}

fn tcp_socket() -> Socket {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("TCP socket");
    // Before connect/listen: the window scale is fixed from the buffer size at SYN time, and
    // an accepted socket inherits the listener's buffers.
    grow_buffers(&sock);
    sock
}

impl TcpPair {
    fn new() -> Self {
        let listener = tcp_socket();
        listener
            .bind(&SocketAddr::from((LOCALHOST, 0)).into())
            .expect("bind TCP listener to 127.0.0.1");
        listener.listen(1).expect("listen");
        let addr = listener.local_addr().expect("listener address");
        let tx = tcp_socket();
        tx.connect(&addr).expect("connect over loopback");
        let (rx, _) = listener.accept().expect("accept");
        let (tx, rx): (TcpStream, TcpStream) = (tx.into(), rx.into());
        for s in [&tx, &rx] {
            // A 64 KiB write is one MSS-sized segment plus a small tail on loopback; Nagle
            // would hold the tail back for an ACK.
            s.set_nodelay(true).expect("TCP_NODELAY");
            s.set_nonblocking(true).expect("non-blocking");
        }
        let mut pair = Self {
            tx,
            rx,
            chunk: vec![0x5a; TCP_CHUNK],
            sink: vec![0; 1 << 20],
        };
        pair.prime();
        pair
    }

    /// Streams a few rounds' worth interleaved so slow start and the receive window's
    /// growth are over before the first round relies on both.
    fn prime(&mut self) {
        let target = 16 * TCP_ROUND * TCP_CHUNK;
        let (mut written, mut read) = (0, 0);
        let deadline = Instant::now() + 10 * DRAIN_TIMEOUT;
        while read < target {
            assert!(Instant::now() < deadline, "TCP priming stalled");
            if written < target {
                match self.tx.write(&self.chunk) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("TCP write: {e}"),
                }
            }
            match self.rx.read(&mut self.sink) {
                Ok(0) => panic!("TCP peer closed"),
                Ok(n) => read += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_readable(
                        self.rx.as_raw_fd(),
                        Instant::now() + Duration::from_millis(1),
                    );
                }
                Err(e) => panic!("TCP read: {e}"),
            }
        }
    }

    /// `writes` full 64 KiB writes; a short one means the send buffer filled up.
    fn write_round(&mut self, writes: usize) {
        for i in 0..writes {
            match self.tx.write(&self.chunk) {
                Ok(TCP_CHUNK) => {}
                other => panic!(
                    "TCP write {i} of {writes} in a round returned {other:?}: \
                     socket buffers too small for a round"
                ),
            }
        }
    }

    /// Reads exactly `bytes` through `buf_len`-byte reads; returns the time spent in them.
    fn read_exact(&mut self, bytes: usize, buf_len: usize, what: &str) -> Duration {
        let (rx, buf) = (&mut self.rx, &mut self.sink[..buf_len]);
        let fd = rx.as_raw_fd();
        collect(fd, bytes, what, || match rx.read(buf) {
            Ok(0) => panic!("{what}: TCP peer closed"),
            other => other,
        })
    }

    /// Bytes queued on the receiving socket.
    fn queued(&self) -> usize {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int through the pointer, which is live and exclusive.
        let rc = unsafe {
            libc::ioctl(
                self.rx.as_raw_fd(),
                libc::FIONREAD,
                &mut n as *mut libc::c_int,
            )
        };
        assert_eq!(rc, 0, "FIONREAD: {}", io::Error::last_os_error());
        n as usize
    }

    /// Waits until all `bytes` of a round are queued on the receiver, so the timed reads
    /// never find a partial segment.
    fn wait_queued(&self, bytes: usize) {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while self.queued() < bytes {
            assert!(
                Instant::now() < deadline,
                "tcp_read: only {} of {bytes} bytes arrived within {DRAIN_TIMEOUT:?}",
                self.queued()
            );
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    fn assert_empty(&mut self) {
        assert_eq!(
            self.queued(),
            0,
            "TCP receive queue not empty after the benchmark"
        );
    }
}

fn tcp(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.throughput(Throughput::Bytes(TCP_CHUNK as u64));
    let param = TCP_CHUNK.to_string();

    let mut pair = TcpPair::new();
    group.bench_function(BenchmarkId::new("tcp_write", &param), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(TCP_ROUND);
                let start = Instant::now();
                pair.write_round(n);
                total += start.elapsed();
                pair.read_exact(n * TCP_CHUNK, pair.sink.len(), "tcp_write drain");
                left -= n;
            }
            total
        })
    });
    pair.assert_empty();

    let mut pair = TcpPair::new();
    group.bench_function(BenchmarkId::new("tcp_read", &param), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(TCP_ROUND);
                pair.write_round(n);
                pair.wait_queued(n * TCP_CHUNK);
                total += pair.read_exact(n * TCP_CHUNK, TCP_CHUNK, "tcp_read");
                left -= n;
            }
            total
        })
    });
    pair.assert_empty();
}

fn socket_io(c: &mut Criterion) {
    let mut group = c.benchmark_group("socket_io");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    udp_send(&mut group);
    udp_recv(&mut group);
    tcp(&mut group);
    group.finish();
}

criterion_group!(benches, socket_io);
criterion_main!(benches);
