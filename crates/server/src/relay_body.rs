//! The origin's response body as the proxy relays it: streamed chunk by chunk, counted, and
//! checked against the content-length the origin announced, so that a body of the wrong
//! length is never passed on as a whole one.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::Body as _;

use crate::relay_stats::{add, RelayStats};

/// An HTTP/3 request stream toward the origin.
pub(crate) type H3Stream = h3::client::RequestStream<qbench_stack::h3_zero_copy::BidiStream, Bytes>;

/// The origin's response body, read as the client takes it: flow control holds the origin
/// back when the client is slower.
pub enum RelayBody {
    H2(hyper::body::Incoming),
    H3(Box<H3Stream>),
    Counted(Box<Self>, Arc<RelayStats>),
    /// Chunks given in advance: the checks' unit tests. An empty one stands for a moment
    /// with nothing to read.
    #[cfg(test)]
    Fixed(std::collections::VecDeque<Bytes>),
    /// The announced length (`None`: none announced), the bytes taken from the origin so far,
    /// the chunk that reached the announced length (held until the origin's end), and
    /// whether that end has been passed on.
    Checked {
        inner: Box<Self>,
        expected: Option<u64>,
        seen: u64,
        held: Option<Bytes>,
        ended: bool,
    },
}

impl RelayBody {
    pub(crate) fn counted(self, stats: Arc<RelayStats>) -> Self {
        Self::Counted(Box::new(self), stats)
    }

    /// Checked against the origin's `content-length`: HTTP/2 (hyper) checks it itself, the
    /// HTTP/3 library does not, and neither holds the last announced bytes until the end.
    pub(crate) fn checked(self, expected: Option<u64>) -> Self {
        Self::Checked {
            inner: Box::new(self),
            expected,
            seen: 0,
            held: None,
            ended: false,
        }
    }

    /// The next chunk; `None` at the end, an error when the upstream stream broke.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<std::io::Result<Bytes>>> {
        match self {
            Self::H2(b) => loop {
                match Pin::new(&mut *b).poll_frame(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Some(Err(broken(e.to_string()))))
                    }
                    Poll::Ready(Some(Ok(f))) => {
                        // Trailers are not relayed: qbench's origin sends none.
                        if let Ok(d) = f.into_data() {
                            return Poll::Ready(Some(Ok(d)));
                        }
                    }
                }
            },
            Self::H3(s) => match s.poll_recv_data(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(None)) => Poll::Ready(None),
                Poll::Ready(Ok(Some(mut d))) => {
                    Poll::Ready(Some(Ok(d.copy_to_bytes(d.remaining()))))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Some(Err(broken(e.to_string())))),
            },
            #[cfg(test)]
            Self::Fixed(chunks) => match chunks.pop_front() {
                Some(c) if c.is_empty() => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                c => Poll::Ready(c.map(Ok)),
            },
            Self::Checked {
                inner,
                expected,
                seen,
                held,
                ended,
            } => match *expected {
                None => inner.poll_chunk(cx),
                Some(want) => poll_checked(inner, want, seen, held, ended, cx),
            },
            Self::Counted(inner, stats) => {
                let r = inner.poll_chunk(cx);
                match &r {
                    Poll::Ready(Some(Ok(d))) => add(&stats.bytes_down, d.len() as u64),
                    Poll::Ready(Some(Err(_))) => add(&stats.broken, 1),
                    _ => {}
                }
                r
            }
        }
    }

    pub async fn next_chunk(&mut self) -> Option<std::io::Result<Bytes>> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }
}

fn broken(e: String) -> std::io::Error {
    std::io::Error::other(format!("upstream: {e}"))
}

/// `inner`'s next chunk with `seen` counted against the `want` bytes announced: more is an
/// error, and so is an end short of them.
fn poll_checked(
    inner: &mut RelayBody,
    want: u64,
    seen: &mut u64,
    held: &mut Option<Bytes>,
    ended: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Option<std::io::Result<Bytes>>> {
    if *ended {
        return Poll::Ready(None);
    }
    loop {
        match inner.poll_chunk(cx) {
            Poll::Ready(Some(Ok(d))) if d.is_empty() => {}
            Poll::Ready(Some(Ok(d))) => {
                let now = seen.saturating_add(d.len() as u64);
                if now > want {
                    return Poll::Ready(Some(Err(broken(format!(
                        "the origin sent more than its content-length of {want}"
                    )))));
                }
                *seen = now;
                if now < want {
                    return Poll::Ready(Some(Ok(d)));
                }
                // A client that has every announced byte may take the body as whole without
                // waiting for the stream's end (curl over HTTP/2 and HTTP/1.1, qbench over
                // HTTP/1.1): the last of them wait for the origin to end there, so that bytes
                // beyond its content-length still break the body.
                *held = Some(d);
            }
            Poll::Ready(None) if *seen != want => {
                return Poll::Ready(Some(Err(broken(format!(
                    "the origin ended after {seen} of its content-length of {want} bytes"
                )))))
            }
            Poll::Ready(None) => {
                *ended = true;
                return Poll::Ready(held.take().map(Ok));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relayed(chunks: &[&'static [u8]], expected: Option<u64>) -> (u64, Option<String>, u64) {
        let stats = Arc::new(RelayStats::default());
        let fixed = RelayBody::Fixed(chunks.iter().map(|c| Bytes::from_static(c)).collect());
        let mut body = fixed.checked(expected).counted(stats.clone());
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let (mut passed, mut error) = (0, None);
        while let Poll::Ready(Some(r)) = body.poll_chunk(&mut cx) {
            match r {
                Ok(d) => passed += d.len() as u64,
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        (passed, error, RelayStats::get(&stats.broken))
    }

    /// A body shorter or longer than the origin's content-length is an error (the client's
    /// stream is reset, and the proxy counts it broken), never a clean end; the excess is
    /// never passed on.
    #[test]
    fn a_body_of_the_wrong_length_is_broken_not_complete() {
        assert_eq!(relayed(&[b"12345", b"67890"], Some(10)), (10, None, 0));
        let (passed, e, broken) = relayed(&[b"12345"], Some(1000));
        assert_eq!((passed, broken), (5, 1));
        assert!(e
            .unwrap()
            .contains("ended after 5 of its content-length of 1000"));
        // The excess comes before the origin's end: the announced bytes are not passed on.
        let (passed, e, broken) = relayed(&[b"1234567890", b"1234567890"], Some(10));
        assert_eq!((passed, broken), (0, 1));
        assert!(e.unwrap().contains("more than its content-length of 10"));
        assert_eq!(relayed(&[b"abc"], None), (3, None, 0));
    }

    /// The bytes that complete the announced length wait for the origin's end: an excess
    /// that comes after a pause still breaks the body before the client has them all, and an
    /// end that comes after a pause lets them through.
    #[test]
    fn the_last_announced_bytes_wait_for_the_origins_end() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let fixed = |chunks: &[&'static [u8]]| {
            RelayBody::Fixed(chunks.iter().map(|c| Bytes::from_static(c)).collect())
        };
        let stats = Arc::new(RelayStats::default());
        let mut body = fixed(&[b"1234567890", b"", b"x"])
            .checked(Some(10))
            .counted(stats.clone());
        assert!(body.poll_chunk(&mut cx).is_pending());
        match body.poll_chunk(&mut cx) {
            Poll::Ready(Some(Err(e))) => assert!(e.to_string().contains("more than")),
            _ => panic!("the excess is an error"),
        }
        assert_eq!(RelayStats::get(&stats.bytes_down), 0);
        assert_eq!(RelayStats::get(&stats.broken), 1);

        let mut body = fixed(&[b"12345", b"67890", b""]).checked(Some(10));
        let mut next = || match body.poll_chunk(&mut cx) {
            Poll::Ready(Some(Ok(d))) => Some(d),
            Poll::Pending => None,
            other => panic!("{:?}", other.map(|c| c.map(|r| r.map(|d| d.len())))),
        };
        assert_eq!(next().as_deref(), Some(&b"12345"[..]));
        assert_eq!(next(), None, "held until the origin's end");
        assert_eq!(next().as_deref(), Some(&b"67890"[..]));
        assert!(matches!(body.poll_chunk(&mut cx), Poll::Ready(None)));
        assert!(matches!(body.poll_chunk(&mut cx), Poll::Ready(None)));
    }
}
