//! An HTTP/2 connection and all its streams on one task, as an event loop serves a socket.
//!
//! hyper spawns a task per stream; on tokio's multi-threaded runtime those tasks run on every
//! worker while the connection's task runs on one, and both sides take h2's per-connection
//! lock and wake each other across threads. With qbench-server on two workers, 100,000 x 1 KB
//! over one connection spent 2.7% of the server's samples in a contended mutex and 7.6% in
//! context switches (`perf record -e cpu-clock`). Here the streams hyper hands to its executor
//! are polled by the connection's own task, so a connection stays on one worker at a time
//! (connections still spread over all of them), and each turn of that task ends with one
//! write of everything its streams answered ([`crate::coalesce`]).

use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::stream::FuturesUnordered;
use futures_util::task::AtomicWaker;
use futures_util::StreamExt;

use crate::coalesce::Gate;

type StreamFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// hyper's executor for one connection: it queues each stream for the connection's task.
#[derive(Clone, Default)]
pub struct StreamQueue {
    shared: Arc<Queued>,
}

#[derive(Default)]
struct Queued {
    futures: Mutex<Vec<StreamFuture>>,
    task: AtomicWaker,
}

impl StreamQueue {
    fn take(&self) -> Vec<StreamFuture> {
        let mut q = self
            .shared
            .futures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        mem::take(&mut *q)
    }
}

impl<F> hyper::rt::Executor<F> for StreamQueue
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        self.shared
            .futures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::pin(fut));
        self.shared.task.wake();
    }
}

/// Drives `conn` (a hyper HTTP/2 connection built with `queue` as its executor and writing
/// through a [`crate::coalesce::Coalesced`] that shares `gate`) and its streams.
pub struct ConnTask<C> {
    conn: Pin<Box<C>>,
    queue: StreamQueue,
    gate: Gate,
    streams: FuturesUnordered<StreamFuture>,
}

impl<C: Future> ConnTask<C> {
    pub fn new(conn: C, queue: StreamQueue, gate: Gate) -> Self {
        Self {
            conn: Box::pin(conn),
            queue,
            gate,
            streams: FuturesUnordered::new(),
        }
    }

    pub fn conn(&mut self) -> Pin<&mut C> {
        self.conn.as_mut()
    }

    fn enqueue(&mut self) -> bool {
        let new = self.queue.take();
        let any = !new.is_empty();
        self.streams.extend(new);
        any
    }

    /// Polls the streams until none is ready. A stream that finishes is dropped here.
    fn run_streams(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(Some(())) = self.streams.poll_next_unpin(cx) {}
    }
}

/// Rounds of "streams answer, connection reads and takes their frames" in one turn, before
/// the task lets others run.
const ROUNDS_PER_TURN: usize = 8;

impl<C: Future> Future for ConnTask<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        this.queue.shared.task.register(cx.waker());
        // Streams answer, then the connection reads requests and takes the streams' frames,
        // its small writes held back; again while requests arrive; then one flush.
        this.gate.hold(true);
        let mut more = false;
        for _ in 0..ROUNDS_PER_TURN {
            this.run_streams(cx);
            if let Poll::Ready(out) = this.conn.as_mut().poll(cx) {
                this.gate.hold(false);
                return Poll::Ready(out);
            }
            more = this.enqueue();
            if !more {
                break;
            }
        }
        this.gate.hold(false);
        if this.gate.unsent() {
            if let Poll::Ready(out) = this.conn.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            more |= this.enqueue();
        }
        if more {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
