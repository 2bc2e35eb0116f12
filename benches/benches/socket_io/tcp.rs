//! The connected loopback TCP pair of the `tcp_write` and `tcp_read` benches.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::{collect, grow_buffers, wait_readable};
use super::{DRAIN_TIMEOUT, LOCALHOST, TCP_CHUNK, TCP_ROUND};

pub(super) struct TcpPair {
    tx: TcpStream,
    rx: TcpStream,
    chunk: Vec<u8>,
    pub(super) sink: Vec<u8>,
}

fn tcp_socket() -> Socket {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("TCP socket");
    // Before connect/listen: the window scale is fixed from the buffer size at SYN time, and
    // an accepted socket inherits the listener's buffers.
    grow_buffers(&sock);
    sock
}

impl TcpPair {
    pub(super) fn new() -> Self {
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

    /// `writes` full writes of `size` bytes; a short one means the send buffer filled up.
    pub(super) fn write_round_of(&mut self, writes: usize, size: usize) {
        for i in 0..writes {
            match self.tx.write(&self.chunk[..size]) {
                Ok(n) if n == size => {}
                other => panic!(
                    "TCP write {i} of {writes} in a round returned {other:?}: \
                     socket buffers too small for a round"
                ),
            }
        }
    }

    /// Reads exactly `bytes` through `buf_len`-byte reads; returns the time spent in them.
    pub(super) fn read_exact(&mut self, bytes: usize, buf_len: usize, what: &str) -> Duration {
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
    pub(super) fn wait_queued(&self, bytes: usize) {
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

    pub(super) fn assert_empty(&mut self) {
        assert_eq!(
            self.queued(),
            0,
            "TCP receive queue not empty after the benchmark"
        );
    }
}
