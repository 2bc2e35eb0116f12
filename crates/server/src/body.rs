//! The hyper response body: chunks of the shared payload buffer, or a short fixed text.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::payload::Chunks;
use crate::routes::Body;

#[derive(Debug)]
pub enum PayloadBody {
    Chunks(Chunks),
    Once(Option<Bytes>),
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
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = match self.get_mut() {
            Self::Chunks(c) => c.next(),
            Self::Once(b) => b.take(),
        };
        Poll::Ready(next.map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Chunks(c) => c.remaining() == 0,
            Self::Once(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Chunks(c) => SizeHint::with_exact(c.remaining()),
            Self::Once(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
