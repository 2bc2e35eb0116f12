//! An `h3::quic` backend over quinn that hands quinn payload as the `Bytes` it came in, where
//! h3-quinn copies every DATA frame's payload into quinn's send buffer. h3 frames a payload
//! chunk behind a small header it encodes on its stack; the header is copied (a few bytes),
//! and a payload chunk that is a slice of the server's shared payload buffer goes to quinn's
//! `write_chunks` as a reference to that buffer. Other payload (telemetry, relayed bodies)
//! is copied once into a `Bytes`, as h3-quinn does. Reading takes quinn's chunks as they
//! stand (`read_chunk`). Client (`qbench`, the proxy's upstream) and server use it alike;
//! h3's protocol logic is stock.

use std::cell::Cell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use futures_util::stream::{self, Stream, StreamExt};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use smallvec::SmallVec;

type Incoming<T> = Pin<Box<dyn Stream<Item = Result<T, quinn::ConnectionError>> + Send + Sync>>;
type Pair = (quinn::SendStream, quinn::RecvStream);

/// What `payload` handed out: a chunk inside the shared buffer comes back as a reference to
/// it; anything else is `None`.
type Share = fn(&[u8]) -> Option<Bytes>;

/// One QUIC connection as h3 drives it.
pub struct Connection {
    accept_bi: Incoming<Pair>,
    accept_uni: Incoming<quinn::RecvStream>,
    opener: OpenStreams,
}

impl Connection {
    pub fn new(conn: quinn::Connection) -> Self {
        Self {
            accept_bi: repeat(conn.clone(), |c| async move { c.accept_bi().await }),
            accept_uni: repeat(conn.clone(), |c| async move { c.accept_uni().await }),
            opener: OpenStreams::new(conn),
        }
    }
}

/// An HTTP/3 client builder that holds at most `max_head` bytes of a response's header
/// section, decoded (the SETTINGS' field section size) and compressed: http3's own bound on
/// the compressed bytes of a HEADERS frame is 16 MiB, whatever the decoded bound says.
pub fn client_builder(max_head: u64) -> h3::client::Builder {
    let mut b = h3::client::builder();
    b.max_field_section_size(max_head)
        .max_qpack_decode_buffer_size(usize::try_from(max_head).unwrap_or(usize::MAX));
    b
}

thread_local! {
    /// A bidirectional stream opened during the poll that `poll_noting_open` watches.
    static OPENED_BI: Cell<bool> = const { Cell::new(false) };
}

/// Polls `f` once, setting `opened` if it opened a request (bidirectional) stream on the way.
/// h3 opens the stream and writes the request in one call; a caller that may drop a request
/// still waiting for the peer's stream credit learns here when it no longer may (the stream
/// is the peer's to count from then), with no hook in h3 for it.
pub fn poll_noting_open<F: Future + ?Sized>(
    f: Pin<&mut F>,
    cx: &mut Context<'_>,
    opened: &mut bool,
) -> Poll<F::Output> {
    let outer = OPENED_BI.replace(false);
    let polled = f.poll(cx);
    *opened |= OPENED_BI.replace(outer);
    polled
}

/// Opens streams of one connection (h3's request sender holds one).
pub struct OpenStreams {
    conn: quinn::Connection,
    open_bi: Option<Incoming<Pair>>,
    /// `open_bi` holds an open that waits for the peer's stream credit.
    waiting_bi: bool,
    open_uni: Option<Incoming<quinn::SendStream>>,
}

impl OpenStreams {
    fn new(conn: quinn::Connection) -> Self {
        Self {
            conn,
            open_bi: None,
            waiting_bi: false,
            open_uni: None,
        }
    }
}

impl Clone for OpenStreams {
    fn clone(&self) -> Self {
        Self::new(self.conn.clone())
    }
}

fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => ConnectionErrorIncoming::ApplicationClose {
            error_code: c.error_code.into_inner(),
        },
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        other => ConnectionErrorIncoming::Undefined(Arc::new(other)),
    }
}

fn stream_error(e: quinn::ConnectionError) -> StreamErrorIncoming {
    StreamErrorIncoming::ConnectionErrorIncoming {
        connection_error: connection_error(e),
    }
}

/// `f` of the connection, again each time the previous one is taken.
fn repeat<T, F, Fut>(conn: quinn::Connection, f: F) -> Incoming<T>
where
    F: Fn(quinn::Connection) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, quinn::ConnectionError>> + Send + Sync + 'static,
    T: 'static,
{
    Box::pin(stream::unfold(conn, move |c| {
        let next = f(c.clone());
        async move { Some((next.await, c)) }
    }))
}

fn next<T>(s: &mut Incoming<T>, cx: &mut Context<'_>) -> Poll<Result<T, quinn::ConnectionError>> {
    // The streams loop forever; were one to end, the connection is of no more use.
    match ready!(s.poll_next_unpin(cx)) {
        Some(r) => Poll::Ready(r),
        None => Poll::Ready(Err(quinn::ConnectionError::LocallyClosed)),
    }
}

impl quic::Connection<Bytes> for Connection {
    type RecvStream = RecvStream;
    type OpenStreams = OpenStreams;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<RecvStream, ConnectionErrorIncoming>> {
        let r = ready!(next(&mut self.accept_uni, cx)).map_err(connection_error)?;
        Poll::Ready(Ok(RecvStream(r)))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, ConnectionErrorIncoming>> {
        let (s, r) = ready!(next(&mut self.accept_bi, cx)).map_err(connection_error)?;
        Poll::Ready(Ok(BidiStream::new(s, r)))
    }

    fn opener(&self) -> OpenStreams {
        self.opener.clone()
    }
}

impl quic::OpenStreams<Bytes> for Connection {
    type BidiStream = BidiStream;
    type SendStream = SendStream;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, StreamErrorIncoming>> {
        self.opener.poll_open_bidi(cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendStream, StreamErrorIncoming>> {
        self.opener.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.opener, code, reason)
    }
}

impl quic::OpenStreams<Bytes> for OpenStreams {
    type BidiStream = BidiStream;
    type SendStream = SendStream;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream, StreamErrorIncoming>> {
        // Most opens find credit at once: quinn's own future, polled once where it is made,
        // opens the stream without the kept one's copy of the connection (a lock on the
        // connection's state to make it and another to drop it, per request).
        if !self.waiting_bi {
            if let Poll::Ready(opened) = pin!(self.conn.open_bi()).poll(cx) {
                let (s, r) = opened.map_err(stream_error)?;
                OPENED_BI.set(true);
                return Poll::Ready(Ok(BidiStream::new(s, r)));
            }
        }
        // No credit: an open kept across polls waits for it (quinn wakes the task then).
        let conn = &self.conn;
        let s = self
            .open_bi
            .get_or_insert_with(|| repeat(conn.clone(), |c| async move { c.open_bi().await }));
        let opened = next(s, cx);
        self.waiting_bi = opened.is_pending();
        let (s, r) = ready!(opened).map_err(stream_error)?;
        OPENED_BI.set(true);
        Poll::Ready(Ok(BidiStream::new(s, r)))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendStream, StreamErrorIncoming>> {
        let conn = &self.conn;
        let s = self
            .open_uni
            .get_or_insert_with(|| repeat(conn.clone(), |c| async move { c.open_uni().await }));
        let s = ready!(next(s, cx)).map_err(stream_error)?;
        Poll::Ready(Ok(SendStream::new(s)))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        let code = quinn::VarInt::from_u64(code.value()).unwrap_or(quinn::VarInt::MAX);
        self.conn.close(code, reason);
    }
}

/// A request stream: both halves.
pub struct BidiStream {
    send: SendStream,
    recv: RecvStream,
}

impl BidiStream {
    fn new(s: quinn::SendStream, r: quinn::RecvStream) -> Self {
        Self {
            send: SendStream::new(s),
            recv: RecvStream(r),
        }
    }
}

impl quic::BidiStream<Bytes> for BidiStream {
    type SendStream = SendStream;
    type RecvStream = RecvStream;

    fn split(self) -> (SendStream, RecvStream) {
        (self.send, self.recv)
    }
}

impl quic::RecvStream for BidiStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl quic::SendStream<Bytes> for BidiStream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }

    fn poll_stopped(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<u64>, StreamErrorIncoming>> {
        self.send.poll_stopped(cx)
    }
}

fn stream_id(id: quinn::StreamId) -> StreamId {
    // quinn's ids are QUIC varints, which h3's `StreamId` takes whole.
    StreamId::try_from(u64::from(id)).expect("a QUIC stream id")
}

/// The receiving half: each read takes quinn's next chunk as it stands.
pub struct RecvStream(quinn::RecvStream);

impl quic::RecvStream for RecvStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        // `read_chunk` is cancel-safe: a future that is dropped pending has read nothing.
        let read = pin!(self.0.read_chunk(usize::MAX, true));
        match ready!(read.poll(cx)) {
            Ok(c) => Poll::Ready(Ok(c.map(|c| c.bytes))),
            Err(quinn::ReadError::Reset(code)) => {
                Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                    error_code: code.into_inner(),
                }))
            }
            Err(quinn::ReadError::ConnectionLost(e)) => Poll::Ready(Err(stream_error(e))),
            Err(other) => Poll::Ready(Err(StreamErrorIncoming::Unknown(Box::new(other)))),
        }
    }

    fn stop_sending(&mut self, error_code: u64) {
        let code = quinn::VarInt::from_u64(error_code).unwrap_or(quinn::VarInt::MAX);
        let _ = self.0.stop(code);
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.0.id())
    }
}

/// What one `send_data` hands quinn: a frame is one or two chunks ([`chunks`]), kept in the
/// stream itself rather than in an allocation of each stream's own.
type Pending = SmallVec<[Bytes; 2]>;

/// quinn's wait for the peer's STOP_SENDING or its acknowledgement of the whole stream.
type Stopped =
    Pin<Box<dyn Future<Output = Result<Option<quinn::VarInt>, quinn::StoppedError>> + Send + Sync>>;

/// The sending half: what `send_data` took waits here, as `Bytes`, until quinn has it all.
pub struct SendStream {
    stream: quinn::SendStream,
    pending: Pending,
    /// Made at the first `poll_stopped` and kept: it holds its place in quinn's wake-ups.
    stopped: Option<Stopped>,
}

impl SendStream {
    fn new(stream: quinn::SendStream) -> Self {
        Self {
            stream,
            pending: Pending::new(),
            stopped: None,
        }
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::WriteError::ConnectionLost(e) => stream_error(e),
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

/// A frame of at most this many bytes goes to quinn as one copy: a request's or a response's
/// HEADERS (frame header and field block) is one allocation and one chunk, not two.
const COPY_WHOLE: usize = 256;

/// Splits what h3 framed into `Bytes` for quinn: a small frame copied whole; otherwise the
/// frame header copied, a payload chunk of the shared buffer shared, anything else copied.
fn chunks(mut data: WriteBuf<Bytes>, share: Share, out: &mut Pending) {
    let whole = data.remaining();
    if whole <= COPY_WHOLE {
        if whole > 0 {
            out.push(data.copy_to_bytes(whole));
        }
        return;
    }
    while data.has_remaining() {
        let c = data.chunk();
        let n = c.len();
        out.push(share(c).unwrap_or_else(|| Bytes::copy_from_slice(c)));
        data.advance(n);
    }
}

impl quic::SendStream<Bytes> for SendStream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        while !self.pending.is_empty() {
            // `write_chunks` is cancel-safe: a future dropped pending wrote nothing, and quinn
            // wakes this task when the stream can take more.
            let result = {
                let write = pin!(self.stream.write_chunks(&mut self.pending));
                ready!(write.poll(cx))
            };
            match result {
                Ok(written) => drop(self.pending.drain(..written.chunks)),
                Err(e) => {
                    // The stream takes no more: what waits here is dropped with it.
                    self.pending.clear();
                    return Poll::Ready(Err(write_error(e)));
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if !self.pending.is_empty() {
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "send_data before the previous data was written".into(),
                ),
            });
        }
        chunks(data.into(), crate::payload::share, &mut self.pending);
        Ok(())
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        ready!(self.poll_ready(cx))?;
        Poll::Ready(
            self.stream
                .finish()
                .map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))),
        )
    }

    fn reset(&mut self, reset_code: u64) {
        let code = quinn::VarInt::from_u64(reset_code).unwrap_or(quinn::VarInt::MAX);
        let _ = self.stream.reset(code);
        self.pending.clear();
    }

    fn send_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }

    fn poll_stopped(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<u64>, StreamErrorIncoming>> {
        let stream = &self.stream;
        let stopped = self
            .stopped
            .get_or_insert_with(|| Box::pin(stream.stopped()));
        let out = ready!(stopped.as_mut().poll(cx));
        // Done, it must not be polled again; another call asks quinn anew, which answers at once.
        self.stopped = None;
        Poll::Ready(match out {
            Ok(code) => Ok(code.map(quinn::VarInt::into_inner)),
            Err(quinn::StoppedError::ConnectionLost(e)) => Err(stream_error(e)),
            Err(e) => Err(StreamErrorIncoming::Unknown(Box::new(e))),
        })
    }
}

/// Unframed writes: QPACK's encoder and decoder streams (the dynamic table's instructions).
impl quic::SendStreamUnframed<Bytes> for SendStream {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        ready!(quic::SendStream::poll_ready(self, cx))?;
        // `write` is cancel-safe: pending, it wrote nothing, and quinn wakes this task.
        let written = {
            let write = pin!(self.stream.write(buf.chunk()));
            ready!(write.poll(cx))
        };
        Poll::Ready(match written {
            Ok(n) => {
                buf.advance(n);
                Ok(n)
            }
            Err(e) => Err(write_error(e)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h3::proto::frame::Frame;

    fn split(frame: Frame<Bytes>) -> Pending {
        let mut out = Pending::new();
        chunks(WriteBuf::from(frame), crate::payload::share, &mut out);
        out
    }

    /// A DATA frame of a shared payload chunk reaches quinn as its header (copied) and the
    /// chunk itself (the same memory); any other payload is copied.
    #[test]
    fn a_shared_payload_chunk_is_passed_on_not_copied() {
        let chunk = crate::payload::Chunks::new(100_000).next().unwrap();
        let out = split(Frame::Data(chunk.clone()));
        assert_eq!(out.len(), 2, "{out:?}");
        // DATA (type 0) and 100000 as a 4-byte varint.
        assert_eq!(&out[0][..], &[0x00, 0x80, 0x01, 0x86, 0xa0]);
        assert_eq!(out[1].as_ptr(), chunk.as_ptr());
        assert_eq!(out[1].len(), 100_000);

        let own = Bytes::from(vec![7u8; 300]);
        let out = split(Frame::Data(own.clone()));
        assert_eq!(out.len(), 2);
        assert_ne!(out[1].as_ptr(), own.as_ptr());
        assert_eq!(out[1], own);
    }

    /// A small frame is one copy of header and payload, a shared payload chunk included.
    #[test]
    fn a_small_frame_is_one_chunk() {
        let block =
            Bytes::from_static(b"\x00\x00\xd1\xd7\x50\x8a\x08\x9d\x5c\x0b\x81\x70\xdc\x78\x0f\x03");
        let out = split(Frame::Headers(block.clone()));
        assert_eq!(out.len(), 1, "{out:?}");
        // HEADERS (type 1), its length, then the field block as it was.
        assert_eq!(&out[0][..2], &[0x01, block.len() as u8]);
        assert_eq!(&out[0][2..], &block[..]);

        let shared = crate::payload::Chunks::new(100).next().unwrap();
        let out = split(Frame::Data(shared.clone()));
        assert_eq!(out.len(), 1, "{out:?}");
        // DATA (type 0) and 100 as a 2-byte varint.
        assert_eq!(&out[0][..3], &[0x00, 0x40, 0x64]);
        assert_eq!(&out[0][3..], &shared[..]);
    }
}
