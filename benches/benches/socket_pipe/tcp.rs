//! The TCP pipe: the bench thread writes, a reader thread reads, over one loopback connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use socket2::{Domain, Protocol, Socket, Type};

use qbench_benches::sys::grow_buffers;

use super::{wait_readable, Pipe, Posted, STALL, TCP_CHUNK, TCP_ROUND};

pub(super) struct TcpPipe {
    tx: TcpStream,
    chunk: Vec<u8>,
    /// Bytes written since the pipe was made.
    written: u64,
    /// The byte count for the reader to reach next; dropping it stops the reader.
    orders: Option<Sender<u64>>,
    /// `written`, posted every round.
    posts: Sender<u64>,
    /// The reader's count once it reached an order.
    done: Receiver<u64>,
    reader: Option<JoinHandle<()>>,
}

fn socket() -> Socket {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("TCP socket");
    // Before connect/listen, as in socket_io: the window scale is fixed at SYN time.
    grow_buffers(&sock);
    sock
}

impl TcpPipe {
    /// A connected pipe whose reader reads at most `read_size` bytes per call.
    pub(super) fn new(read_size: usize) -> Self {
        let listener = socket();
        listener
            .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .expect("bind TCP listener to 127.0.0.1");
        listener.listen(1).expect("listen");
        let listener: TcpListener = listener.into();
        let addr = listener.local_addr().expect("listener address");
        let tx = socket();
        tx.connect(&addr.into()).expect("connect over loopback");
        let (rx, _) = listener.accept().expect("accept");
        let tx: TcpStream = tx.into();
        for s in [&tx, &rx] {
            s.set_nodelay(true).expect("TCP_NODELAY");
        }
        tx.set_write_timeout(Some(STALL)).expect("SO_SNDTIMEO");
        rx.set_nonblocking(true).expect("non-blocking");
        let (orders, todo) = channel();
        let (posts, posted) = channel();
        let (report, done) = channel();
        let reader = std::thread::spawn(move || {
            read_orders(rx, read_size, &todo, Posted::new(posted), &report);
        });
        let mut pipe = Self {
            tx,
            chunk: vec![0x5a; TCP_CHUNK],
            written: 0,
            orders: Some(orders),
            posts,
            done,
            reader: Some(reader),
        };
        // Slow start and the receive window's growth are over before anything is measured.
        pipe.stream(16 * TCP_ROUND);
        pipe
    }
}

impl Pipe for TcpPipe {
    /// Writes `chunks` 64 KiB chunks and returns once the reader has read every byte.
    fn stream(&mut self, chunks: u64) {
        let target = self.written + chunks * TCP_CHUNK as u64;
        let orders = self.orders.as_ref().expect("reader running");
        orders.send(target).expect("reader alive");
        for i in 1..=chunks {
            self.tx
                .write_all(&self.chunk)
                .expect("TCP write (stalled?)");
            self.written += TCP_CHUNK as u64;
            if i % TCP_ROUND == 0 || i == chunks {
                self.posts.send(self.written).expect("reader alive");
            }
        }
        let got = self.done.recv_timeout(STALL).expect("reader finished");
        assert_eq!(got, target, "reader read a different byte count");
    }
}

fn read_orders(
    mut rx: TcpStream,
    read_size: usize,
    todo: &Receiver<u64>,
    mut posted: Posted,
    report: &Sender<u64>,
) {
    let mut buf = vec![0u8; read_size];
    let mut got = 0u64;
    while let Ok(target) = todo.recv() {
        while got < target {
            let room = (target - got).min(read_size as u64) as usize;
            match rx.read(&mut buf[..room]) {
                Ok(0) => panic!("TCP peer closed at byte {got} of {target}"),
                Ok(n) => got += n as u64,
                // Written but not yet here (window): the kernel wakes us when it arrives.
                Err(e) if e.kind() == ErrorKind::WouldBlock && posted.latest() > got => {
                    wait_readable(rx.as_raw_fd(), "TCP pipe");
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    posted.beyond(got, "TCP pipe reader");
                }
                Err(e) => panic!("TCP read at byte {got} of {target}: {e}"),
            }
        }
        if report.send(got).is_err() {
            return;
        }
    }
}

impl Drop for TcpPipe {
    fn drop(&mut self) {
        self.orders = None;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}
