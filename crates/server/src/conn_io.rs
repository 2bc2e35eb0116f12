//! The TCP stream under TLS: it counts moving bytes (for the idle timeout), detaches
//! the telemetry sampler before the fd closes, and closes gracefully: after its own FIN it
//! reads and discards what the peer still sends, for a bounded time, so an answer such as a
//! 431 reaches a peer that was still sending instead of being destroyed by a reset.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::telemetry::ConnTelemetry;
use qbench_stack::activity::{Activity, Counted};

/// How long, and how many bytes, a closing connection keeps reading what the peer sends.
pub const LINGER: Duration = Duration::from_secs(2);
pub const LINGER_BYTES: u64 = 4 * 1024 * 1024;

pub struct Tracked {
    inner: Counted<TcpStream>,
    telemetry: Option<Arc<ConnTelemetry>>,
    linger: Option<Linger>,
}

struct Linger {
    until: Pin<Box<Sleep>>,
    drained: u64,
}

impl Tracked {
    pub fn new(inner: TcpStream) -> Self {
        Self {
            inner: Counted::new(
                inner,
                Activity::default(),
                &qbench_stack::activity::SERVER_TCP,
            ),
            telemetry: None,
            linger: None,
        }
    }

    pub fn activity(&self) -> Activity {
        self.inner.activity().clone()
    }

    pub fn fd(&self) -> RawFd {
        self.inner.get_ref().as_raw_fd()
    }

    /// Hands over the sampler of this socket, to be detached before the fd closes.
    pub fn set_telemetry(&mut self, t: Option<Arc<ConnTelemetry>>) {
        self.telemetry = t;
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(t) = &self.telemetry {
            t.detach();
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
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
        let me = &mut *self;
        if me.linger.is_none() {
            ready!(Pin::new(&mut me.inner).poll_shutdown(cx))?;
            me.linger = Some(Linger {
                until: Box::pin(tokio::time::sleep(LINGER)),
                drained: 0,
            });
        }
        let linger = me.linger.as_mut().expect("set above");
        let mut scratch = [0u8; 16 * 1024];
        loop {
            if linger.until.as_mut().poll(cx).is_ready() || linger.drained >= LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut me.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => linger.drained += buf.filled().len() as u64,
                // The peer reset or the socket broke: nothing left to protect.
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
