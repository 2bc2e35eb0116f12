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
pub(crate) type H3Stream = h3::client::RequestStream<crate::h3_zero_copy::BidiStream, Bytes>;

/// The origin's response body, read as the client takes it: flow control holds the origin
/// back when the client is slower.
pub enum RelayBody {
    H2(hyper::body::Incoming),
    H3(Box<H3Stream>),
    Counted(Box<Self>, Arc<RelayStats>),
    /// Chunks given in advance: the checks' unit tests.
    #[cfg(test)]
    Fixed(std::collections::VecDeque<Bytes>),
    /// The announced length (`None`: none announced) and the bytes passed on so far.
    Checked {
        inner: Box<Self>,
        expected: Option<u64>,
        seen: u64,
    },
}

impl RelayBody {
    pub(crate) fn counted(self, stats: Arc<RelayStats>) -> Self {
        Self::Counted(Box::new(self), stats)
    }

    /// Checked against the origin's `content-length`: HTTP/2 (hyper) checks it itself, the
    /// HTTP/3 library does not.
    pub(crate) fn checked(self, expected: Option<u64>) -> Self {
        Self::Checked {
            inner: Box::new(self),
            expected,
            seen: 0,
        }
    }

    /// The next chunk; `None` at the end, an error when the upstream stream broke.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<std::io::Result<Bytes>>> {
        let broken = |e: String| std::io::Error::other(format!("upstream: {e}"));
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
            Self::Fixed(chunks) => Poll::Ready(chunks.pop_front().map(Ok)),
            Self::Checked {
                inner,
                expected,
                seen,
            } => {
                let r = inner.poll_chunk(cx);
                let Some(want) = *expected else { return r };
                match r {
                    Poll::Ready(Some(Ok(d))) => {
                        let now = seen.saturating_add(d.len() as u64);
                        if now > want {
                            return Poll::Ready(Some(Err(broken(format!(
                                "the origin sent more than its content-length of {want}"
                            )))));
                        }
                        *seen = now;
                        Poll::Ready(Some(Ok(d)))
                    }
                    Poll::Ready(None) if *seen != want => Poll::Ready(Some(Err(broken(format!(
                        "the origin ended after {seen} of its content-length of {want} bytes"
                    ))))),
                    other => other,
                }
            }
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
        let (passed, e, broken) = relayed(&[b"1234567890", b"1234567890"], Some(10));
        assert_eq!((passed, broken), (10, 1));
        assert!(e.unwrap().contains("more than its content-length of 10"));
        assert_eq!(relayed(&[b"abc"], None), (3, None, 0));
    }
}
