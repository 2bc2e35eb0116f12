//! Small writes held until the end of a turn of the connection's task, then written at once.
//!
//! The h2 crate writes a DATA frame of more than 256 bytes as a slice of its own and flushes
//! before it takes the next frame, so over TLS every 1 KB response was a TLS record and a
//! `writev` of its own (10,000 x 1 KB over one connection, 100 streams at once: 20,005
//! `writev`s for 20,000 responses). While the [`Gate`] is held, writes shorter than
//! `PASS_THROUGH` are copied into a buffer and a flush keeps them there (if there are any);
//! once it is released, a flush or a read writes them as one. Longer writes (bulk DATA frames)
//! go straight through, after what is buffered, so a bulk transfer pays no copy. The task that
//! holds the gate (the HTTP/2 connection task) releases it for a last poll of the connection at
//! the end of each of its turns; and when the peer's side ends, what is buffered is sent.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Writes at least this long are not copied.
pub const PASS_THROUGH: usize = 4096;
/// Buffered bytes beyond which a small write first sends what is buffered.
pub const BUFFER_LIMIT: usize = 64 * 1024;

/// Shared by the writer and the task that drives it (one thread at a time: relaxed order).
#[derive(Clone, Debug, Default)]
pub struct Gate {
    held: Arc<AtomicBool>,
    unsent: Arc<AtomicBool>,
}

impl Gate {
    pub fn hold(&self, held: bool) {
        self.held.store(held, Ordering::Relaxed);
    }

    /// Bytes wait in the buffer for a flush with the gate open.
    pub fn unsent(&self) -> bool {
        self.unsent.load(Ordering::Relaxed)
    }
}

pub struct Coalesced<T> {
    inner: T,
    gate: Gate,
    buf: Vec<u8>,
    /// How much of `buf` has gone to `inner`.
    sent: usize,
}

impl<T> Coalesced<T> {
    pub fn new(inner: T, gate: Gate) -> Self {
        Self {
            inner,
            gate,
            buf: Vec::new(),
            sent: 0,
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncWrite + Unpin> Coalesced<T> {
    /// Sends what is buffered to `inner` (without flushing `inner`).
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        self.sent = 0;
        self.gate.unsent.store(false, Ordering::Relaxed);
        Poll::Ready(Ok(()))
    }

    fn poll_send_flushed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Copies `bufs` in; the buffer grows to `BUFFER_LIMIT` at most.
    fn keep(&mut self, bufs: &[io::IoSlice<'_>], len: usize) {
        let need = self.buf.len() + len;
        if need > self.buf.capacity() {
            let cap = (self.buf.capacity() * 2).clamp(need, BUFFER_LIMIT.max(need));
            self.buf.reserve_exact(cap - self.buf.len());
        }
        bufs.iter().for_each(|b| self.buf.extend_from_slice(b));
        self.gate.unsent.store(true, Ordering::Relaxed);
    }

    fn poll_write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if len >= PASS_THROUGH || self.buf.len() + len > BUFFER_LIMIT {
            ready!(self.poll_send(cx))?;
        }
        if len >= PASS_THROUGH {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        self.keep(bufs, len);
        Poll::Ready(Ok(len))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Coalesced<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A read with the gate open sends what waits: h2 reads before it flushes, and while
        // it waits for the client's preface it only reads (its SETTINGS are buffered).
        if !self.buf.is_empty() && !self.gate.held.load(Ordering::Relaxed) {
            if let Poll::Ready(Err(e)) = self.poll_send_flushed(cx) {
                return Poll::Ready(Err(e));
            }
        }
        let filled = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &read {
            Poll::Ready(Ok(())) => buf.filled().len() == filled,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        // h2 may close without a flush when the peer's side ends: the answers already made
        // still leave, as far as the socket takes them.
        if ended && !self.buf.is_empty() {
            let _ = self.poll_send_flushed(cx);
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesced<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // With nothing of ours buffered a flush goes through: what a long write left in
        // `inner` must not wait for the gate.
        if self.gate.held.load(Ordering::Relaxed) && !self.buf.is_empty() {
            return Poll::Ready(Ok(()));
        }
        self.poll_send_flushed(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Records each write it is handed and counts flushes.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        shut: bool,
        /// What reads return; then end of stream.
        to_read: Vec<u8>,
    }

    impl AsyncRead for Recorder {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let n = self.to_read.len().min(buf.remaining());
            buf.put_slice(&self.to_read[..n]);
            self.to_read.drain(..n);
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    fn bytes(n: usize, b: u8) -> Vec<u8> {
        vec![b; n]
    }

    #[tokio::test]
    async fn held_flushes_keep_small_writes_until_the_gate_opens() {
        let gate = Gate::default();
        let mut w = Coalesced::new(Recorder::default(), gate.clone());
        gate.hold(true);
        for i in 0..100u8 {
            w.write_all(&bytes(1009, i)).await.unwrap();
            w.flush().await.unwrap();
        }
        // Only the buffer's limit sent anything: the 64 writes that fit in it, at once.
        assert_eq!(w.get_ref().writes.len(), 1);
        assert_eq!(w.get_ref().writes[0].len(), 64 * 1009);
        assert_eq!(w.get_ref().flushes, 0);
        assert!(gate.unsent());
        gate.hold(false);
        w.flush().await.unwrap();
        assert!(!gate.unsent());
        let r = w.get_ref();
        assert_eq!(r.writes.len(), 2);
        assert_eq!(r.flushes, 1);
        let all: Vec<u8> = r.writes.concat();
        let want: Vec<u8> = (0..100u8).flat_map(|i| bytes(1009, i)).collect();
        assert_eq!(all, want);
    }

    #[tokio::test]
    async fn long_writes_go_through_after_what_is_buffered() {
        let gate = Gate::default();
        let mut w = Coalesced::new(Recorder::default(), gate.clone());
        gate.hold(true);
        w.write_all(&bytes(9, 1)).await.unwrap();
        w.write_all(&bytes(PASS_THROUGH, 2)).await.unwrap();
        let r = w.get_ref();
        assert_eq!(r.writes, vec![bytes(9, 1), bytes(PASS_THROUGH, 2)]);
        // Nothing of ours is buffered: a held flush reaches the stream below.
        w.flush().await.unwrap();
        assert_eq!(w.get_ref().flushes, 1);
        assert!(!gate.unsent());
    }

    #[tokio::test]
    async fn shutdown_sends_what_is_buffered_first() {
        let gate = Gate::default();
        let mut w = Coalesced::new(Recorder::default(), gate.clone());
        gate.hold(true);
        w.write_all(b"GOAWAY").await.unwrap();
        w.shutdown().await.unwrap();
        let r = w.get_ref();
        assert_eq!(r.writes, vec![b"GOAWAY".to_vec()]);
        assert!(r.shut);
    }

    #[tokio::test]
    async fn an_open_gate_writes_on_every_flush() {
        let gate = Gate::default();
        let mut w = Coalesced::new(Recorder::default(), gate);
        for i in 0..3u8 {
            w.write_all(&bytes(100, i)).await.unwrap();
            w.flush().await.unwrap();
        }
        let r = w.get_ref();
        assert_eq!(r.writes.len(), 3);
        assert_eq!(r.flushes, 3);
    }

    #[tokio::test]
    async fn a_read_with_the_gate_open_sends_what_waits() {
        use tokio::io::AsyncReadExt;
        let gate = Gate::default();
        let rec = Recorder {
            to_read: b"preface".to_vec(),
            ..Default::default()
        };
        let mut w = Coalesced::new(rec, gate.clone());
        gate.hold(true);
        w.write_all(b"SETTINGS").await.unwrap();
        w.flush().await.unwrap();
        let mut got = [0u8; 3];
        w.read_exact(&mut got).await.unwrap();
        // Held: the read leaves it.
        assert!(w.get_ref().writes.is_empty());
        gate.hold(false);
        w.read_exact(&mut got).await.unwrap();
        assert_eq!(w.get_ref().writes, vec![b"SETTINGS".to_vec()]);
        assert_eq!(w.get_ref().flushes, 1);
    }

    #[tokio::test]
    async fn the_end_of_the_peers_side_sends_what_waits() {
        use tokio::io::AsyncReadExt;
        let gate = Gate::default();
        let mut w = Coalesced::new(Recorder::default(), gate.clone());
        gate.hold(true);
        w.write_all(b"response").await.unwrap();
        w.flush().await.unwrap();
        let mut got = Vec::new();
        assert_eq!(w.read_to_end(&mut got).await.unwrap(), 0);
        assert_eq!(w.get_ref().writes, vec![b"response".to_vec()]);
    }

    #[tokio::test]
    async fn the_buffer_never_holds_more_than_its_limit() {
        let gate = Gate::default();
        let mut w = Coalesced::new(Recorder::default(), gate.clone());
        gate.hold(true);
        for n in [1usize, 100, 4095, 3000, 17, 4000] {
            for _ in 0..40 {
                w.write_all(&bytes(n, 7)).await.unwrap();
                assert!(w.buf.capacity() <= BUFFER_LIMIT, "{}", w.buf.capacity());
            }
        }
    }
}
