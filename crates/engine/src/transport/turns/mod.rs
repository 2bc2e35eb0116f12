//! A connection task that reads a long burst hands the request tasks a turn now and then.
//!
//! h2 drives each connection from one task that parses frames until its socket has nothing
//! more. With 100 requests in flight against a fast server the socket always has more, so
//! without a turn the whole burst of responses is parsed before any request task learns its
//! response is complete: the object's end is stamped late, its replacement request goes out
//! only after the burst, and client and server take turns at being idle (each waits for the
//! other's whole batch). Handing over every [`TURN_BYTES`] lets the requests answered early
//! in a burst record their end and send the next request while the rest is still being read,
//! so the server works on those while the client reads.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read between turns: one TLS record's plaintext, two or three of h2's reads, about 15
/// responses of 1 KB. On loopback with 100 and 256 requests of 1 KB in flight, 8 to 32 KiB
/// all broke the lock-step (the book, "Userspace packet cost"); a turn costs a pass of the
/// scheduler, not a syscall.
pub(crate) const TURN_BYTES: usize = 16 * 1024;

/// Bytes between turns for a connection that shares its thread with `sharing - 1` others.
/// The lock-step needs a thread with one busy connection; with more, the other connections'
/// reads interleave with this one's anyway, and a turn every 16 KiB only adds passes of the
/// scheduler over request state that is no longer in cache: 64 connections x 100 requests of
/// 1 KB on one thread took 7.9 CPU-us per object with 16 KiB turns and 6.2 with 256 KiB or
/// none, at 1.25x the objects per second.
pub(crate) fn turn_bytes(sharing: usize) -> usize {
    TURN_BYTES.saturating_mul(sharing.max(1))
}

/// `S` with a turn for the other tasks after every `every` bytes read in a row; a read that
/// finds nothing (the task waits anyway) starts the count again. Writes pass straight through.
pub(crate) struct Turns<S> {
    inner: S,
    every: usize,
    read_since_turn: usize,
}

impl<S> Turns<S> {
    pub(crate) fn new(inner: S, every: usize) -> Self {
        Self {
            inner,
            every: every.max(1),
            read_since_turn: 0,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Turns<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.read_since_turn >= this.every {
            this.read_since_turn = 0;
            // Woken from inside its own poll, a tokio task goes to the back of the run queue
            // (both schedulers treat it as a yield), behind the request tasks this read woke.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) => this.read_since_turn += buf.filled().len() - before,
            _ => this.read_since_turn = 0,
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Turns<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
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

#[cfg(test)]
mod tests;
