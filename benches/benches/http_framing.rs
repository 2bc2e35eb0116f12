//! The HTTP layer's cost per DATA frame of a response body, without TLS or sockets.
//!
//! - `h2_data`: a hyper HTTP/2 client and server joined by an in-memory `tokio::io::duplex`
//!   pipe on a current-thread runtime. The server answers a GET with a body of frames of
//!   exactly `param` bytes (the client advertises a max frame size of 256 KiB and windows large
//!   enough that flow control never stalls the sender). This measures everything hyper and h2
//!   do per frame (framing, flow control and WINDOW_UPDATEs, stream state, task wakeups) plus
//!   the pipe's two copies of the payload, which stand in for the socket write and read.
//!   Each timed run is one request whose body has as many frames as criterion asks for; the
//!   request and response heads are a constant per run, which criterion's linear fit of time
//!   against iterations leaves out of the per-frame slope.
//! - `h3_data`: h3's own framing of a request stream's DATA (the frame header encoded as
//!   `RequestStream::send_data` does it, `FrameStream`'s decoding of it; the request stream's
//!   sequence checks are left out, as h3's constructor for it is not public) over a trivial
//!   in-memory QUIC stream. The stream copies what it is given
//!   into a `Bytes`, as quinn's `SendStream::write` does (`quic_packet` writes its stream data
//!   untimed, so the copy is counted here), and hands it to the receiver without copying, as
//!   quinn's `read_chunk` does. There is no QUIC underneath: packetization, encryption, ACKs,
//!   flow control and stream state live in quinn and are measured by `quic_packet`. Unlike
//!   `h2_data`, no flow control or stream state machine is included and no task is woken.
//!
//! One iteration is one DATA frame sent and received; the parameter is its payload size.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use h3::frame::FrameStream;
use h3::proto::frame::{Frame as H3Frame, PayloadLen};
use h3::quic::{RecvStream, SendStream, StreamErrorIncoming, StreamId};
use h3::stream::{BufRecvStream, WriteBuf};
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Frame, SizeHint};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::runtime::Runtime;

const SIZES: [usize; 2] = [16384, 262144];
/// Large enough that the writer rarely waits for the reader, like a socket's send buffer.
const PIPE_BYTES: usize = 4 << 20;
/// Far more than a frame, so the sender never runs out of window between WINDOW_UPDATEs.
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 64 << 20;

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        // The reported time is then the slope of time against frames, free of per-run costs.
        .sampling_mode(SamplingMode::Linear)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
}

/// A response body of `frames` chunks of the same bytes, each of which hyper hands to h2 as
/// one DATA frame; the last one carries END_STREAM.
struct Frames {
    chunk: Bytes,
    frames: u64,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.frames == 0 {
            return Poll::Ready(None);
        }
        self.frames -= 1;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.frames * self.chunk.len() as u64)
    }
}

/// A client connected to a server that answers `GET /{frames}` with `frames` frames.
async fn connect(size: usize) -> SendRequest<Empty<Bytes>> {
    let (client_io, server_io) = tokio::io::duplex(PIPE_BYTES);
    let chunk = Bytes::from(vec![0x5a; size]);
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let frames = req.uri().path()[1..]
            .parse()
            .expect("frame count in the path");
        let body = Frames {
            chunk: chunk.clone(),
            frames,
        };
        async move { Ok::<_, Infallible>(Response::new(body)) }
    });
    tokio::spawn(async move {
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(server_io), service)
            .await
            .expect("server connection");
    });
    let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .max_frame_size(SIZES[1] as u32)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .adaptive_window(false)
        .handshake(TokioIo::new(client_io))
        .await
        .expect("client handshake");
    tokio::spawn(async move {
        conn.await.expect("client connection");
    });
    sender
}

/// Fetches a body of `frames` frames and checks that each arrived whole.
async fn fetch(sender: &mut SendRequest<Empty<Bytes>>, frames: u64, size: usize) {
    sender.ready().await.expect("connection ready");
    let req = Request::get(format!("http://bench/{frames}"))
        .body(Empty::new())
        .expect("request");
    let mut body = sender
        .send_request(req)
        .await
        .expect("response")
        .into_body();
    let mut received = 0u64;
    while let Some(frame) = body.frame().await {
        let data = frame.expect("body frame").into_data().expect("no trailers");
        // A split frame would mean the parameter is not the frame size being measured.
        assert_eq!(data.len(), size, "DATA frame split or merged");
        received += 1;
    }
    assert_eq!(received, frames, "frames lost");
}

fn h2_data(c: &mut Criterion) {
    // As in qbench and qbench-server: hyper's 256 KiB frame buffers would otherwise go back
    // to the kernel and fault in again on every frame.
    qbench_stack::heap::keep_freed_memory();
    let mut group = c.benchmark_group("http_framing");
    configure(&mut group);
    for size in SIZES {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let mut sender = rt.block_on(connect(size));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new("h2_data", size), |b| {
            b.iter_custom(|iters| timed(&rt, fetch(&mut sender, iters, size)))
        });
        drop(sender);
        drop(rt);
    }
    group.finish();
}

fn timed<F: std::future::Future<Output = ()>>(rt: &Runtime, f: F) -> Duration {
    let start = Instant::now();
    rt.block_on(f);
    start.elapsed()
}

type Pipe = Rc<RefCell<VecDeque<Bytes>>>;

/// The sending half of an in-memory QUIC stream, buffering like h3-quinn's `SendStream`.
struct MemSend {
    pipe: Pipe,
    writing: Option<WriteBuf<Bytes>>,
}

impl SendStream<Bytes> for MemSend {
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(mut data) = self.writing.take() {
            let mut pipe = self.pipe.borrow_mut();
            while data.has_remaining() {
                let chunk = data.chunk();
                let len = chunk.len();
                pipe.push_back(Bytes::copy_from_slice(chunk));
                data.advance(len);
            }
        }
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        assert!(self.writing.is_none(), "send_data before poll_ready");
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(Ok(()))
    }

    fn reset(&mut self, _: u64) {}

    fn send_id(&self) -> StreamId {
        StreamId::try_from(0).expect("client bidi stream 0")
    }

    fn poll_stopped(
        &mut self,
        _: &mut Context<'_>,
    ) -> Poll<Result<Option<u64>, StreamErrorIncoming>> {
        Poll::Pending
    }
}

/// The receiving half: whatever was written, in the chunks it was written in.
struct MemRecv {
    pipe: Pipe,
}

impl RecvStream for MemRecv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        _: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        // Only polled while data is queued, so nothing ever needs waking.
        match self.pipe.borrow_mut().pop_front() {
            Some(chunk) => Poll::Ready(Ok(Some(chunk))),
            None => Poll::Pending,
        }
    }

    fn stop_sending(&mut self, _: u64) {}

    fn recv_id(&self) -> StreamId {
        StreamId::try_from(0).expect("client bidi stream 0")
    }
}

struct H3Pair {
    send: MemSend,
    recv: FrameStream<MemRecv, Bytes>,
}

impl H3Pair {
    fn new() -> Self {
        let pipe = Pipe::default();
        let send = MemSend {
            pipe: pipe.clone(),
            writing: None,
        };
        let recv = FrameStream::new(BufRecvStream::new(MemRecv { pipe }));
        Self { send, recv }
    }

    /// Sends `payload` as one DATA frame and receives it, feeding each piece of its payload
    /// to `take`; returns the payload bytes read.
    #[inline]
    fn frame(
        &mut self,
        payload: &Bytes,
        cx: &mut Context<'_>,
        mut take: impl FnMut(Bytes),
    ) -> usize {
        self.send
            .send_data(H3Frame::Data(payload.clone()))
            .expect("send_data");
        let ready = self.send.poll_ready(cx);
        assert!(
            matches!(ready, Poll::Ready(Ok(()))),
            "in-memory stream never blocks"
        );
        let len = match self.recv.poll_next(cx) {
            Poll::Ready(Ok(Some(H3Frame::Data(PayloadLen(len))))) => len,
            Poll::Ready(Ok(other)) => panic!("not a DATA frame: {other:?}"),
            Poll::Ready(Err(e)) => panic!("poll_next: {e:?}"),
            Poll::Pending => panic!("frame header incomplete with the whole frame queued"),
        };
        let mut got = 0;
        while got < len {
            match self.recv.poll_data(cx) {
                Poll::Ready(Ok(Some(mut data))) => {
                    let n = data.remaining();
                    got += n;
                    take(data.copy_to_bytes(n));
                }
                Poll::Ready(Ok(None)) => panic!("frame ended early"),
                Poll::Ready(Err(e)) => panic!("poll_data: {e:?}"),
                Poll::Pending => panic!("frame incomplete with the whole frame queued"),
            }
        }
        got
    }

    /// The measured path only counts bytes; check once that it carries the right ones.
    fn check_round_trip(&mut self, cx: &mut Context<'_>) {
        let sent = Bytes::from((0..SIZES[1]).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let mut received = Vec::new();
        self.frame(&sent, cx, |b| received.extend_from_slice(&b));
        assert!(received == sent, "round trip altered the payload");
        assert!(self.recv.poll_next(cx).is_pending(), "stray data");
    }
}

fn h3_data(c: &mut Criterion) {
    let mut group = c.benchmark_group("http_framing");
    configure(&mut group);
    let mut cx = Context::from_waker(Waker::noop());
    for size in SIZES {
        let mut pair = H3Pair::new();
        pair.check_round_trip(&mut cx);
        let payload = Bytes::from(vec![0x5a; size]);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new("h3_data", size), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut got = 0;
                for _ in 0..iters {
                    got += pair.frame(&payload, &mut cx, drop);
                }
                let elapsed = start.elapsed();
                assert_eq!(got as u64, iters * size as u64, "payload lost");
                elapsed
            })
        });
    }
    group.finish();
}

criterion_group!(benches, h2_data, h3_data);
fn main() {
    // Copies as qbench's binaries make them, so the costs compare like for like.
    qbench_stack::rep_movsb::at_start_or_exit();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
