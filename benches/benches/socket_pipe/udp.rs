//! The UDP pipe: the bench thread sends GSO batches through quinn-udp, a receiver thread
//! takes them with GRO and `recvmmsg`, as quinn's endpoints do.

use std::io::{ErrorKind, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use socket2::{Domain, Protocol, Socket, Type};

use qbench_benches::sys::grow_buffers;

use super::{wait_readable, Pipe, Posted, DATAGRAM, GSO_SEGMENTS, UDP_ROUND};

/// quinn-udp's receive batch on Linux.
const BATCH: usize = 32;
/// The largest message GRO can hand back (one whole GSO send).
const MAX_MESSAGE: usize = 65_535 - 20 - 8;

pub(super) struct UdpPipe {
    tx: UdpSocket,
    tx_state: UdpSocketState,
    dst: SocketAddr,
    payload: Vec<u8>,
    /// Datagrams sent since the pipe was made.
    sent: u64,
    /// The count for the receiver to reach next; dropping it stops the receiver.
    orders: Option<Sender<u64>>,
    /// `sent`, posted every round.
    posts: Sender<u64>,
    /// What the receiver has taken, posted every round and at the end of an order.
    taken: Posted,
    receiver: Option<JoinHandle<()>>,
}

fn socket() -> UdpSocket {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("UDP socket");
    grow_buffers(&sock);
    sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind UDP socket to 127.0.0.1");
    sock.into()
}

impl UdpPipe {
    pub(super) fn new() -> Self {
        let tx = socket();
        let tx_state = UdpSocketState::new(UdpSockRef::from(&tx)).expect("quinn-udp state");
        assert!(
            tx_state.max_gso_segments() >= GSO_SEGMENTS,
            "UDP GSO is unavailable on this kernel"
        );
        let rx = socket();
        let rx_state = UdpSocketState::new(UdpSockRef::from(&rx)).expect("quinn-udp state");
        assert!(rx_state.gro_segments() > 1, "UDP GRO is unavailable");
        rx.set_nonblocking(true).expect("non-blocking");
        let dst = rx.local_addr().expect("local address");
        let (orders, todo) = channel();
        let (posts, posted) = channel();
        let (report, taken) = channel();
        let receiver = std::thread::spawn(move || {
            receive_orders(&rx, &rx_state, &todo, Posted::new(posted), &report);
        });
        let mut pipe = Self {
            tx,
            tx_state,
            dst,
            payload: vec![0x5a; GSO_SEGMENTS * DATAGRAM],
            sent: 0,
            orders: Some(orders),
            posts,
            taken: Posted::new(taken),
            receiver: Some(receiver),
        };
        pipe.stream(4 * UDP_ROUND as u64);
        pipe
    }
}

impl Pipe for UdpPipe {
    /// Sends `datagrams` full-size datagrams, at most two rounds ahead of the receiver, and
    /// returns once it has taken every one.
    fn stream(&mut self, datagrams: u64) {
        let target = self.sent + datagrams;
        let orders = self.orders.as_ref().expect("receiver running");
        orders.send(target).expect("receiver alive");
        let (round, ahead) = (UDP_ROUND as u64, 2 * UDP_ROUND as u64);
        while self.sent < target {
            if self.sent - self.taken.latest() >= ahead {
                self.taken.beyond(self.sent - ahead, "UDP pipe sender");
            }
            let n = (target - self.sent).min(GSO_SEGMENTS as u64) as usize;
            let transmit = Transmit {
                destination: self.dst,
                ecn: None,
                contents: &self.payload[..n * DATAGRAM],
                segment_size: (n > 1).then_some(DATAGRAM),
                src_ip: None,
            };
            self.tx_state
                .send(UdpSockRef::from(&self.tx), &transmit)
                .expect("quinn-udp send");
            let before = self.sent;
            self.sent += n as u64;
            if self.sent / round != before / round || self.sent == target {
                self.posts.send(self.sent).expect("receiver alive");
            }
        }
        let taken = self.taken.beyond(target - 1, "UDP pipe sender");
        assert_eq!(taken, target, "receiver took a different count");
    }
}

fn receive_orders(
    rx: &UdpSocket,
    state: &UdpSocketState,
    todo: &Receiver<u64>,
    mut posted: Posted,
    report: &Sender<u64>,
) {
    let mut store = vec![0u8; BATCH * MAX_MESSAGE];
    let mut bufs: Vec<IoSliceMut<'_>> =
        store.chunks_mut(MAX_MESSAGE).map(IoSliceMut::new).collect();
    let mut meta = [RecvMeta::default(); BATCH];
    let round = UDP_ROUND as u64;
    let mut got = 0u64;
    while let Ok(target) = todo.recv() {
        while got < target {
            match state.recv(UdpSockRef::from(rx), &mut bufs, &mut meta) {
                Ok(msgs) => {
                    let before = got;
                    for m in &meta[..msgs] {
                        assert_eq!(m.stride, DATAGRAM, "unexpected datagram size");
                        got += (m.len / m.stride) as u64;
                    }
                    if (got / round != before / round || got >= target) && report.send(got).is_err()
                    {
                        return;
                    }
                }
                // Loopback queues a datagram within its send call: anything posted and not
                // here after the wait was dropped, and the wait fails.
                Err(e) if e.kind() == ErrorKind::WouldBlock && posted.latest() > got => {
                    wait_readable(rx.as_raw_fd(), "UDP pipe");
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    posted.beyond(got, "UDP pipe receiver");
                }
                Err(e) => panic!("quinn-udp recv: {e}"),
            }
        }
        assert_eq!(got, target, "received more datagrams than were sent");
    }
}

impl Drop for UdpPipe {
    fn drop(&mut self) {
        self.orders = None;
        if let Some(r) = self.receiver.take() {
            let _ = r.join();
        }
    }
}
