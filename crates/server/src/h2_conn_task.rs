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
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};

use futures_util::stream::FuturesUnordered;
use futures_util::task::AtomicWaker;
use futures_util::{FutureExt, StreamExt};

use crate::coalesce::Gate;

type StreamFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The streams hyper has handed over and not yet polled; owned by the connection's task.
#[derive(Default)]
pub struct Streams {
    shared: Arc<Queued>,
}

/// hyper's executor for one connection: it queues each stream for the connection's task. It
/// holds the queue weakly: the stream futures hold copies of it, and a strong one would make
/// a queued future keep itself alive once the task is gone.
#[derive(Clone)]
pub struct StreamQueue {
    shared: Weak<Queued>,
}

#[derive(Default)]
struct Queued {
    futures: Mutex<Vec<StreamFuture>>,
    task: AtomicWaker,
    /// The task is being polled: it takes what is queued before it returns.
    polling: AtomicBool,
}

impl Streams {
    pub fn executor(&self) -> StreamQueue {
        StreamQueue {
            shared: Arc::downgrade(&self.shared),
        }
    }

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
        // Gone with its connection: the stream goes too.
        let Some(q) = self.shared.upgrade() else {
            return;
        };
        // A panic ends its stream only, as it would end a task of its own.
        let fut = AssertUnwindSafe(fut).catch_unwind().map(|_| ());
        q.futures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::pin(fut));
        if !q.polling.load(Ordering::Relaxed) {
            q.task.wake();
        }
    }
}

/// Drives `conn` (a hyper HTTP/2 connection built with `streams.executor()` as its executor
/// and writing through a [`crate::coalesce::Coalesced`] that shares `gate`) and its streams.
pub struct ConnTask<C> {
    conn: Pin<Box<C>>,
    queue: Streams,
    gate: Gate,
    streams: FuturesUnordered<StreamFuture>,
}

impl<C: Future> ConnTask<C> {
    pub fn new(conn: C, queue: Streams, gate: Gate) -> Self {
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

    fn turn(&mut self, cx: &mut Context<'_>) -> Poll<C::Output> {
        // Streams answer, then the connection reads requests and takes the streams' frames,
        // its small writes held back; again while requests arrive (and tokio's budget for
        // this turn lasts); then one flush.
        self.gate.hold(true);
        let mut more = false;
        for _ in 0..ROUNDS_PER_TURN {
            self.run_streams(cx);
            if let Poll::Ready(out) = self.conn.as_mut().poll(cx) {
                self.gate.hold(false);
                return Poll::Ready(out);
            }
            more = self.enqueue();
            if !more || !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        self.gate.hold(false);
        if self.gate.unsent() {
            if let Poll::Ready(out) = self.conn.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            more |= self.enqueue();
        }
        // Streams that arrived in the last poll run on the next turn, after other tasks.
        if more {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// Rounds of "streams answer, connection reads and takes their frames" in one turn, before
/// the task lets others run.
const ROUNDS_PER_TURN: usize = 8;

impl<C: Future> Future for ConnTask<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        let q = this.queue.shared.clone();
        q.task.register(cx.waker());
        q.polling.store(true, Ordering::Relaxed);
        let out = this.turn(cx);
        q.polling.store(false, Ordering::Relaxed);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn queued_streams_go_with_their_connection() {
        let streams = Streams::default();
        let exec = streams.executor();
        let held = Arc::new(());
        // As hyper's stream futures do: each holds a copy of the executor.
        for _ in 0..3 {
            let (held, exec) = (held.clone(), exec.clone());
            exec.clone().execute(async move {
                let _keep = (held, exec);
            });
        }
        assert_eq!(Arc::strong_count(&held), 4);
        drop(streams);
        assert_eq!(Arc::strong_count(&held), 1);
        // And a stream handed over afterwards is dropped at once.
        let late = held.clone();
        exec.execute(async move {
            let _keep = late;
        });
        assert_eq!(Arc::strong_count(&held), 1);
    }

    #[tokio::test]
    async fn a_panicking_stream_ends_alone() {
        let streams = Streams::default();
        let exec = streams.executor();
        let done = Arc::new(AtomicUsize::new(0));
        exec.execute(async { panic!("one stream's bug") });
        for _ in 0..2 {
            let done = done.clone();
            exec.execute(async move {
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        let mut task = ConnTask::new(std::future::pending::<()>(), streams, Gate::default());
        // One turn: the connection stays open; the streams run, the panic ends only its own.
        let turn = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut task).poll(cx))).await;
        assert!(turn.is_pending());
        assert_eq!(done.load(Ordering::Relaxed), 2);
        assert_eq!(task.streams.len(), 0);
    }
}
