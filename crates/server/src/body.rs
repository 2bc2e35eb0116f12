//! The hyper response body: chunks of the shared payload buffer, a short fixed text, or (in
//! a proxy) the origin's body.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::routes::Body;
use qbench_stack::payload::Chunks;

pub enum PayloadBody {
    Chunks(Chunks),
    Once(Option<Bytes>),
    /// `qbench proxy`: the origin's body as it arrives.
    Relay(crate::relay::RelayBody),
}

impl From<Body> for PayloadBody {
    fn from(b: Body) -> Self {
        match b {
            Body::Payload(n) => Self::Chunks(Chunks::new(n)),
            Body::Bytes(b) if b.is_empty() => Self::Once(None),
            Body::Bytes(b) => Self::Once(Some(b)),
        }
    }
}

impl http_body::Body for PayloadBody {
    type Data = Bytes;
    /// Only a relayed body fails: its upstream stream broke, and the client's is reset.
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let next = match self.get_mut() {
            Self::Chunks(c) => c.next(),
            Self::Once(b) => b.take(),
            Self::Relay(r) => return r.poll_chunk(cx).map(|c| c.map(|d| d.map(Frame::data))),
        };
        Poll::Ready(next.map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Chunks(c) => c.remaining() == 0,
            Self::Once(b) => b.is_none(),
            Self::Relay(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Chunks(c) => SizeHint::with_exact(c.remaining()),
            Self::Once(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Self::Relay(_) => SizeHint::default(),
        }
    }
}

/// A response body that tells the truth log when it starts and how it ends (only when the
/// log keeps the request; otherwise it is the body alone).
pub struct Traced {
    inner: PayloadBody,
    seen: Option<crate::truth::Answering>,
    status: u16,
}

impl Traced {
    pub fn new(inner: PayloadBody, seen: crate::truth::Answering, status: u16) -> Self {
        Self {
            inner,
            seen: seen.is_kept().then_some(seen),
            status,
        }
    }
}

impl From<PayloadBody> for Traced {
    fn from(inner: PayloadBody) -> Self {
        Self {
            inner,
            seen: None,
            status: 0,
        }
    }
}

impl http_body::Body for Traced {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(s) = &mut this.seen {
            // hyper polls the body once the head is encoded: the head is out of our hands.
            if this.status != 0 {
                s.head(std::mem::take(&mut this.status));
            }
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let Some(s) = &mut this.seen else {
            return polled;
        };
        let ended = match &polled {
            Poll::Ready(Some(Ok(f))) => {
                s.bytes += f.data_ref().map_or(0, |d| d.len() as u64);
                this.inner.is_end_stream().then_some(true)
            }
            Poll::Ready(None) => Some(true),
            Poll::Ready(Some(Err(_))) => Some(false),
            Poll::Pending => None,
        };
        if let Some(complete) = ended {
            // Ends the record when the last byte is handed over, not when hyper drops the body.
            s.complete = complete;
            this.seen = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
