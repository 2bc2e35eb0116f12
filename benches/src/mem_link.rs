//! An in-memory datagram link for quinn endpoints: two sockets that hand each other whole
//! GSO batches, delivered as GRO would deliver them (one buffer, `stride` apart), with no
//! kernel in between. It lets a bench run quinn's endpoint and connection tasks as they run
//! in a transfer and charge them nothing for system calls, which `socket_pipe` measures.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// Segments per send, as quinn sends them on Linux (its `MAX_TRANSMIT_SEGMENTS`), and so per
/// receive.
pub const SEGMENTS: usize = 10;

struct Batch {
    from: SocketAddr,
    data: Vec<u8>,
    stride: usize,
}

/// What waits to be received on one socket.
#[derive(Default)]
struct Inbox {
    queue: VecDeque<Batch>,
    waker: Option<Waker>,
}

/// One end of the link.
pub struct MemSocket {
    addr: SocketAddr,
    inbox: Arc<Mutex<Inbox>>,
    peer: Arc<Mutex<Inbox>>,
}

impl fmt::Debug for MemSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemSocket")
            .field("addr", &self.addr)
            .finish()
    }
}

/// Two connected sockets with these addresses.
pub fn pair(a: SocketAddr, b: SocketAddr) -> (Arc<MemSocket>, Arc<MemSocket>) {
    let (ia, ib) = (Arc::default(), Arc::default());
    let sa = MemSocket {
        addr: a,
        inbox: Arc::clone(&ia),
        peer: Arc::clone(&ib),
    };
    let sb = MemSocket {
        addr: b,
        inbox: ib,
        peer: ia,
    };
    (Arc::new(sa), Arc::new(sb))
}

#[derive(Debug)]
struct AlwaysWritable;

impl UdpPoller for AlwaysWritable {
    fn poll_writable(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn lock(m: &Mutex<Inbox>) -> std::sync::MutexGuard<'_, Inbox> {
    // A panic elsewhere cannot leave an inbox half-updated: every change is one push or pop.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AsyncUdpSocket for MemSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(AlwaysWritable)
    }

    fn try_send(&self, t: &Transmit<'_>) -> io::Result<()> {
        let batch = Batch {
            from: self.addr,
            data: t.contents.to_vec(),
            stride: t.segment_size.unwrap_or(t.contents.len()),
        };
        let waker = {
            let mut peer = lock(&self.peer);
            peer.queue.push_back(batch);
            peer.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut inbox = lock(&self.inbox);
        if inbox.queue.is_empty() {
            inbox.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut n = 0;
        while n < bufs.len().min(meta.len()) {
            let Some(b) = inbox.queue.pop_front() else {
                break;
            };
            let len = b.data.len();
            if len > bufs[n].len() {
                return Poll::Ready(Err(io::Error::other(format!(
                    "a {len}-byte batch for a {}-byte receive buffer",
                    bufs[n].len()
                ))));
            }
            bufs[n][..len].copy_from_slice(&b.data);
            meta[n] = RecvMeta {
                addr: b.from,
                len,
                stride: b.stride,
                ecn: None,
                dst_ip: None,
            };
            n += 1;
        }
        Poll::Ready(Ok(n))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    fn max_transmit_segments(&self) -> usize {
        SEGMENTS
    }

    fn max_receive_segments(&self) -> usize {
        SEGMENTS
    }

    fn may_fragment(&self) -> bool {
        false
    }
}
