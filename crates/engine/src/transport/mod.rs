//! HTTP/1.1, HTTP/2 and HTTP/3 behind one small pair of object-safe traits: a `Transport`
//! makes connections, a `Conn` is a shared handle that fetches one object at a time per call.

pub(crate) mod activity;
pub(crate) mod classify;
pub(crate) mod h1;
pub(crate) mod h2;
pub(crate) mod h3;
#[cfg(test)]
pub(crate) mod mock;
pub(crate) mod peer_params;
pub(crate) mod pinned;
pub(crate) mod prefetch;
mod progress;
pub(crate) mod received;
pub(crate) mod reopen;
pub(crate) mod streams;
pub(crate) mod tcp;
pub(crate) mod tls;
pub(crate) mod turns;
pub(crate) mod verify;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use qbench_core::{ErrorKind, HandshakeInfo, ObjectOutcome};

use crate::measure::clock::Clock;
use crate::transport::verify::DigestBook;
pub(crate) use activity::{Dog, Watchdog};
pub(crate) use progress::Progress;
use streams::StreamFacts;

/// One object to fetch.
#[derive(Debug, Clone)]
pub(crate) struct ObjectReq {
    pub uri: Uri,
    /// Body length the request asks for (`/bytes/{n}`); `None` for arbitrary URLs, where
    /// the response's content-length is checked instead.
    pub expected_len: Option<u64>,
    /// Check body content (`--verify`).
    pub verify: bool,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct FetchError {
    pub kind: ErrorKind,
    pub message: String,
    /// The server did not process the request (an HTTP/2 GOAWAY above it or REFUSED_STREAM,
    /// an HTTP/3 GOAWAY or H3_REQUEST_REJECTED, an HTTP/1.1 connection closed before it
    /// went out): it may go again on another connection.
    pub unprocessed: bool,
    /// Of those, one whose stream alone the server turned away, keeping the connection
    /// (HTTP/2 REFUSED_STREAM, HTTP/3 H3_REQUEST_REJECTED): it may go again on the same one.
    pub refused: bool,
    /// Never sent: the run stopped starting requests (a held closed loop's end, or a stop)
    /// while this one waited for a stream. It is dropped, not counted: a request that never
    /// left the client is one the run did not make, as one it never took up.
    pub cut: bool,
}

impl FetchError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            unprocessed: false,
            refused: false,
            cut: false,
        }
    }

    /// A request dropped unsent as its run stopped starting requests (see `cut`).
    pub(crate) fn cut() -> Self {
        Self {
            cut: true,
            ..Self::new(
                ErrorKind::Io,
                "the run stopped starting requests before this one was sent",
            )
        }
    }

    /// Classifies `e` by its source chain; `what` names the step that failed.
    pub(crate) fn from_err(what: &str, e: &(dyn std::error::Error + 'static)) -> Self {
        let unprocessed = classify::unprocessed(e);
        Self {
            kind: classify::classify(e),
            message: format!("{what}: {}", classify::one_line(e)),
            unprocessed: unprocessed.is_some(),
            refused: unprocessed == Some(classify::Unprocessed::Refused),
            cut: false,
        }
        .hinted()
    }

    /// Marks the request as one the server never saw.
    pub(crate) fn unsent(mut self) -> Self {
        self.unprocessed = true;
        self
    }

    /// The message with what to do about it, where that is known.
    fn hinted(mut self) -> Self {
        if let Some(h) = classify::hint(&self.message) {
            self.message = format!("{} (hint: {h})", self.message);
        }
        self
    }

    pub(crate) fn timeout(what: &str, after: Duration) -> Self {
        Self::new(
            ErrorKind::Timeout,
            format!(
                "{what}: no progress for {}",
                humantime::format_duration(after)
            ),
        )
        .hinted()
    }
}

/// Where and how to connect; shared by every connection of a run.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub addr: SocketAddr,
    /// TLS server name (SNI and certificate check).
    pub server_name: String,
    pub timeout: Duration,
    /// Receive-window cap in bytes (`--rwnd`).
    pub rwnd: Option<u32>,
    /// QUIC's packet threshold (`--reorder-threshold`).
    pub reorder_threshold: Option<u32>,
    /// QUIC's time threshold in RTTs (`--reorder-time-threshold`).
    pub reorder_time_threshold: Option<f64>,
    /// QUIC stack settings (`--quic`).
    pub quic: qbench_core::spec::quic_knobs::QuicKnobs,
}

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Resolves, once the handshake completes, to the handshake facts including whether the
/// server accepted the 0-RTT data.
pub(crate) type ZeroRtt = BoxFuture<'static, HandshakeInfo>;

/// A connection that finished its handshake.
pub(crate) struct Connected {
    pub conn: Arc<dyn Conn>,
    pub info: HandshakeInfo,
    /// When the handshake completed, on the run clock.
    pub done: Duration,
    /// With 0-RTT, requests go out before the handshake completes; this resolves to whether
    /// the server accepted the early data, and the handshake is recorded when it does.
    pub zero_rtt: Option<ZeroRtt>,
}

pub(crate) trait Transport: Send + Sync {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>>;

    /// Called once after the last run, so that peers see our close before the endpoint
    /// goes away.
    fn finish(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// The receive and send buffers the kernel granted the transport's UDP sockets; `None`
    /// over TCP.
    fn udp_buffers(&self) -> Option<(u64, u64)> {
        None
    }
}

/// When a run stops starting requests (a held load's end, or a stop): a slot makes no new
/// attempt after it, and a request still waiting for a stream gives up there.
pub(crate) trait RunEnd: Send + Sync {
    fn over(&self) -> bool;
    /// Resolves when the run is over.
    fn reached(&self) -> BoxFuture<'_, ()>;
    /// Resolves when a signal stopped the run (not at its end).
    fn stopping(&self) -> BoxFuture<'_, ()>;
}

/// Receives one response as a transport reads it.
pub(crate) trait Sink: Send {
    /// The request is about to be sent (after any wait for a stream or the connection).
    fn sending(&mut self) {}
    /// The request's stream on its connection, where the protocol has streams.
    fn stream(&mut self, _id: u64) {}
    fn headers(
        &mut self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
    ) -> Result<(), FetchError>;
    fn data(&mut self, chunk: &[u8]) -> Result<(), FetchError>;
    /// The request's start, or once it is sent, its sending, where the sink stamped them: a
    /// transport's timers start there instead of reading the clock again.
    fn stamped(&self) -> Option<tokio::time::Instant> {
        None
    }
    /// Whether any of the response arrived: a request the server answered, even in part, is
    /// never sent again.
    fn answered(&self) -> bool;
    /// The request goes again on a new connection; what the sink stamped is the first
    /// attempt's, too early for the next one's timers.
    fn again(&mut self) {}
    /// Until it is sent, a request that waits for a stream gives up when this run ends (it
    /// stops starting requests) and fails with `FetchError::cut`; `None`: it waits on.
    fn unsent_until(&self) -> Option<&dyn RunEnd> {
        None
    }
}

/// A connection as the runner holds it (`Arc<dyn Conn>`).
pub(crate) trait Conn: Send + Sync {
    /// `GET uri` on this connection, feeding the response to `sink`; timed by `dog` where
    /// the caller lends its timer.
    fn exchange<'a>(
        &'a self,
        uri: &'a Uri,
        sink: &'a mut dyn Sink,
        dog: Dog<'a>,
    ) -> BoxFuture<'a, Result<(), FetchError>>;

    /// The server's stream limit and this connection's peak since the last call.
    fn streams(&self) -> StreamFacts;

    /// Graceful close; the peer learns of it from the connection's own task.
    fn close(&self);

    /// What replaced this connection since the last call, where the server closed it.
    fn reopens(&self) -> reopen::Reopens;

    /// The slot this connection is, where it is one: a caller that makes request after
    /// request can keep the connection and go through the slot only when it changes.
    fn as_slot(&self) -> Option<&reopen::Reopening>;
}

/// What each HTTP version implements; `Conn` boxes its future for dynamic dispatch.
pub(crate) trait Exchange: Send + Sync {
    fn request<'a>(
        &'a self,
        uri: &'a Uri,
        sink: &'a mut dyn Sink,
        dog: Dog<'a>,
    ) -> impl Future<Output = Result<(), FetchError>> + Send + 'a;

    fn streams(&self) -> StreamFacts;

    /// Where dropping the last handle closes the connection, there is nothing to do.
    fn shut(&self) {}

    fn reopens(&self) -> reopen::Reopens {
        reopen::Reopens::default()
    }

    fn as_slot(&self) -> Option<&reopen::Reopening> {
        None
    }
}

impl<T: Exchange> Conn for T {
    fn exchange<'a>(
        &'a self,
        uri: &'a Uri,
        sink: &'a mut dyn Sink,
        dog: Dog<'a>,
    ) -> BoxFuture<'a, Result<(), FetchError>> {
        // Made as the request starts, and as cold as its worker by the time the response comes.
        Box::pin(prefetch::Prefetched::new(self.request(uri, sink, dog)))
    }

    fn streams(&self) -> StreamFacts {
        Exchange::streams(self)
    }

    fn close(&self) {
        self.shut();
    }

    fn reopens(&self) -> reopen::Reopens {
        Exchange::reopens(self)
    }

    fn as_slot(&self) -> Option<&reopen::Reopening> {
        Exchange::as_slot(self)
    }
}

/// Sends a prepared hyper request (h1) and feeds the response to `sink`.
/// `body_error` adjusts errors that happen after the response head arrived.
async fn hyper_exchange<F>(
    send: F,
    timeout: Duration,
    activity: &activity::Activity,
    sink: &mut dyn Sink,
    body_error: fn(FetchError) -> FetchError,
) -> Result<(), FetchError>
where
    F: Future<Output = Result<http::Response<hyper::body::Incoming>, hyper::Error>>,
{
    use http_body_util::BodyExt;

    sink.sending();
    let resp = activity::step_while_moving(
        Some(activity),
        "waiting for response headers",
        timeout,
        send,
    )
    .await?;
    sink.headers(resp.status(), resp.headers())?;
    let mut body = resp.into_body();
    loop {
        let frame =
            activity::step_while_moving(Some(activity), "reading response body", timeout, async {
                body.frame().await.transpose()
            })
            .await
            .map_err(body_error)?;
        match frame {
            Some(f) => {
                if let Some(d) = f.data_ref() {
                    sink.data(d)?;
                }
            }
            None => return Ok(()),
        }
    }
}

/// `GET uri`, made in place: the builder's `Result` of parts is moved (a memcpy call each)
/// once per method and again for the body, on every request.
fn get(uri: &Uri) -> http::Request<()> {
    let mut request = http::Request::new(());
    *request.uri_mut() = uri.clone();
    request
}

/// Fetches one object, measuring and checking it; a hashed body whose digest differs from an
/// earlier fetch of the same URL in `book` counts as a mismatch.
pub(crate) async fn fetch(
    conn: &dyn Conn,
    clock: &Clock,
    req: &ObjectReq,
    book: &DigestBook,
) -> ObjectOutcome {
    let mut p = Progress::start(clock, req);
    let result = match conn.as_slot() {
        Some(slot) => {
            slot.exchange_held(&mut slot.hold(), &req.uri, &mut p, None)
                .await
        }
        None => conn.exchange(&req.uri, &mut p, None).await,
    };
    p.end(result, book)
}

/// As [`fetch`], measured by `p`, on `held`, the connection a closed loop's worker keeps from
/// `slot`, timed by `dog` where the worker lends its timer; `None` where the request was
/// dropped unsent at its run's end (`Sink::unsent_until`). A slot's request is driven as
/// part of the caller's future: through `dyn Conn` it would be a box of its own per request.
pub(crate) async fn fetch_held(
    slot: &reopen::Reopening,
    held: &mut reopen::Held,
    mut p: Progress<'_>,
    book: &DigestBook,
    dog: Dog<'_>,
) -> Option<ObjectOutcome> {
    let result = slot.exchange_held(held, p.uri(), &mut p, dog).await;
    match result {
        Err(e) if e.cut => None,
        result => Some(p.end(result, book)),
    }
}

/// Collects a small response body (telemetry), refusing more than `limit` bytes.
struct Collect {
    body: Vec<u8>,
    limit: usize,
    uri: String,
    answered: bool,
}

impl Sink for Collect {
    fn headers(&mut self, status: http::StatusCode, _: &http::HeaderMap) -> Result<(), FetchError> {
        self.answered = true;
        if status.is_success() {
            Ok(())
        } else {
            Err(FetchError::new(
                ErrorKind::Status,
                format!("{} answered {status}", self.uri),
            ))
        }
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), FetchError> {
        self.answered = true;
        if self.body.len() + chunk.len() > self.limit {
            return Err(FetchError::new(
                ErrorKind::LongBody,
                format!("{}: more than {} bytes", self.uri, self.limit),
            ));
        }
        self.body.extend_from_slice(chunk);
        Ok(())
    }

    fn answered(&self) -> bool {
        self.answered
    }
}

/// `GET uri` on the connection as it stands (a slot's current one, never one opened in its
/// place: what is asked is that connection's own), its body up to `limit` bytes.
pub(crate) async fn get_body(
    conn: &dyn Conn,
    uri: &Uri,
    limit: usize,
) -> Result<Vec<u8>, FetchError> {
    let current = conn.as_slot().map(reopen::Reopening::current);
    let conn = current.as_deref().unwrap_or(conn);
    let mut sink = Collect {
        body: Vec::new(),
        limit,
        uri: uri.to_string(),
        answered: false,
    };
    conn.exchange(uri, &mut sink, None).await?;
    Ok(sink.body)
}

/// Runs `fut` with the idle timeout, naming the step in the error.
pub(crate) async fn step<T, E>(
    what: &str,
    after: Duration,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, FetchError>
where
    E: std::error::Error + 'static,
{
    activity::step_while_moving(None, what, after, fut).await
}
