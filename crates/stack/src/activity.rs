//! When bytes last moved on a connection, and a stream wrapper that keeps that up to date.
//! The server closes connections on which nothing moved for `--idle-timeout`; the client
//! times out a request only when nothing moved on its connection for `--timeout`.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Activity(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    start: Instant,
    /// Microseconds after `start` of the last byte read or written.
    last_us: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Inner {
            start: Instant::now(),
            last_us: AtomicU64::new(0),
        }))
    }
}

impl Activity {
    /// Bytes moved now.
    pub fn touch(&self) {
        let us = self.0.start.elapsed().as_micros() as u64;
        self.0.last_us.fetch_max(us, Ordering::Relaxed);
    }

    /// When bytes last moved (the start, if none has).
    pub fn last(&self) -> Instant {
        self.0.start + Duration::from_micros(self.0.last_us.load(Ordering::Relaxed))
    }

    /// Resolves once nothing has moved for `idle`.
    pub async fn idle(&self, idle: Duration) {
        loop {
            let deadline = self.last() + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// Socket calls that moved bytes, summed over the connections of one side of this process
/// (the cost model counts the system calls a transfer made). Aligned to two cache lines so
/// that the client's and the server's tallies, updated on every call from different cores,
/// never share one (adjacent-line prefetch pairs lines on x86).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CallTally {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    written_bytes: AtomicU64,
}

/// The client's TCP connections in this process.
pub static CLIENT_TCP: CallTally = CallTally::new();
/// The TCP connections of the qbench-servers in this process.
pub static SERVER_TCP: CallTally = CallTally::new();

impl CallTally {
    pub const fn new() -> Self {
        Self {
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
        }
    }

    fn read(&self, n: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn wrote(&self, n: usize) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.written_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> qbench_core::SocketCalls {
        qbench_core::SocketCalls {
            reads: self.reads.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
        }
    }
}

/// A stream that tells its `Activity` whenever bytes move, and counts the calls that moved
/// them.
pub struct Counted<S> {
    inner: S,
    activity: Activity,
    tally: &'static CallTally,
}

impl<S> Counted<S> {
    pub fn new(inner: S, activity: Activity, tally: &'static CallTally) -> Self {
        Self {
            inner,
            activity,
            tally,
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    pub fn activity(&self) -> &Activity {
        &self.activity
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = ready!(Pin::new(&mut self.inner).poll_read(cx, buf));
        let n = buf.filled().len() - before.min(buf.filled().len());
        if n > 0 {
            self.activity.touch();
            self.tally.read(n);
        }
        Poll::Ready(r)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = ready!(Pin::new(&mut self.inner).poll_write(cx, buf));
        if let Ok(n @ 1..) = r {
            self.activity.touch();
            self.tally.wrote(n);
        }
        Poll::Ready(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, bufs));
        if let Ok(n @ 1..) = r {
            self.activity.touch();
            self.tally.wrote(n);
        }
        Poll::Ready(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
