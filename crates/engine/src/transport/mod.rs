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
use crate::transport::verify::{Check, DigestBook};
pub(crate) use activity::{Dog, Watchdog};
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
}

impl FetchError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            unprocessed: false,
            refused: false,
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
    if let Some(slot) = conn.as_slot() {
        return fetch_held(slot, &mut slot.hold(), p, book, None).await;
    }
    let result = conn.exchange(&req.uri, &mut p, None).await;
    p.end(result, book)
}

/// As [`fetch`], measured by `p`, on `held`, the connection a closed loop's worker keeps from
/// `slot`, timed by `dog` where the worker lends its timer. A slot's request is driven as
/// part of the caller's future: through `dyn Conn` it would be a box of its own per request.
pub(crate) async fn fetch_held(
    slot: &reopen::Reopening,
    held: &mut reopen::Held,
    mut p: Progress<'_>,
    book: &DigestBook,
    dog: Dog<'_>,
) -> ObjectOutcome {
    let result = slot.exchange_held(held, &p.req.uri, &mut p, dog).await;
    p.end(result, book)
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

/// Accumulates one response; every transport reports through it so checks are identical.
pub(crate) struct Progress<'a> {
    clock: &'a Clock,
    req: &'a ObjectReq,
    /// When the fetch began: the client took the request up. Read only where a figure uses
    /// it (an open loop's own lag); a closed loop's request is timed from its sending.
    began: Option<Duration>,
    /// When it was first sent; `None` before that.
    sent: Option<Duration>,
    /// Sent again on a new connection.
    again: bool,
    headers: Option<Duration>,
    content_length: Option<u64>,
    bytes: u64,
    check: Option<Check>,
    status: Option<u16>,
    stream: Option<u64>,
}

impl Sink for Progress<'_> {
    /// A request sent again on a new connection keeps its first time: the server's close
    /// and the new handshake are part of what it cost.
    fn sending(&mut self) {
        if self.sent.is_none() {
            self.sent = Some(self.clock.now());
        }
    }

    fn stream(&mut self, id: u64) {
        self.stream = Some(id);
    }

    /// Response head arrived; a non-2xx status is an error of kind `status`.
    fn headers(
        &mut self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
    ) -> Result<(), FetchError> {
        self.headers = Some(self.clock.now());
        self.status = Some(status.as_u16());
        // With the length known from the request, the body is counted against it as it comes
        // and at its end (a lying content-length fails there, as the same kind): looking the
        // header up too costs a small object a cache miss or two, as its header map waits in
        // memory while thousands of other responses are parsed.
        if self.req.expected_len.is_none() {
            self.content_length = headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok());
        }
        if !status.is_success() {
            return Err(FetchError::new(
                ErrorKind::Status,
                format!("{} answered {status}", self.req.uri),
            ));
        }
        Ok(())
    }

    fn stamped(&self) -> Option<tokio::time::Instant> {
        if self.again {
            return None;
        }
        self.sent.or(self.began).map(|t| self.clock.at(t))
    }

    fn answered(&self) -> bool {
        self.headers.is_some() || self.bytes > 0
    }

    fn again(&mut self) {
        self.again = true;
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), FetchError> {
        self.bytes += chunk.len() as u64;
        received::add(chunk.len() as u64);
        if let Some(c) = &mut self.check {
            c.update(chunk);
        }
        match self.expected() {
            Some(want) if self.bytes > want => Err(FetchError::new(
                ErrorKind::LongBody,
                format!("{}: more than {want} body bytes", self.req.uri),
            )),
            _ => Ok(()),
        }
    }
}

impl<'a> Progress<'a> {
    pub(crate) fn start(clock: &'a Clock, req: &'a ObjectReq) -> Self {
        Self {
            began: Some(clock.now()),
            ..Self::closed_loop(clock, req)
        }
    }

    /// As [`Progress::start`] without reading the clock: a closed loop takes its next request
    /// up as the last one ends, and no figure uses when. One clock read fewer of the four a
    /// small object made; h2's timer reads its own start where it needs one.
    pub(crate) fn closed_loop(clock: &'a Clock, req: &'a ObjectReq) -> Self {
        Progress {
            clock,
            req,
            began: None,
            sent: None,
            again: false,
            headers: None,
            content_length: None,
            bytes: 0,
            status: None,
            stream: None,
            check: req.verify.then(|| match req.expected_len {
                Some(_) => Check::pattern(),
                None => Check::digest(),
            }),
        }
    }

    fn expected(&self) -> Option<u64> {
        self.req.expected_len.or(self.content_length)
    }

    /// The exchange ended with `result`: the outcome.
    fn end(self, result: Result<(), FetchError>, book: &DigestBook) -> ObjectOutcome {
        match result {
            Ok(()) => self.finish(book),
            Err(e) => self.fail(e),
        }
    }

    /// The body ended: checks byte count and content, and produces the outcome.
    pub(crate) fn finish(mut self, book: &DigestBook) -> ObjectOutcome {
        let done = self.clock.now();
        let err = match (self.expected(), self.check.take().map(Check::finish)) {
            (Some(want), _) if self.bytes < want => Some(FetchError::new(
                ErrorKind::ShortBody,
                format!("{}: {} of {want} body bytes", self.req.uri, self.bytes),
            )),
            (_, Some(Err(at))) => Some(FetchError::new(
                ErrorKind::BodyMismatch,
                format!(
                    "{}: body differs from the payload at byte {at}",
                    self.req.uri
                ),
            )),
            (_, Some(Ok(Some(d)))) => book.record(&self.req.uri.to_string(), &d).map(|prev| {
                FetchError::new(
                    ErrorKind::BodyMismatch,
                    format!(
                        "{}: sha256 {d} differs from an earlier fetch's {prev}",
                        self.req.uri
                    ),
                )
            }),
            _ => None,
        };
        self.outcome_at(done, err)
    }

    pub(crate) fn fail(self, e: FetchError) -> ObjectOutcome {
        let done = self.clock.now();
        self.outcome_at(done, Some(e))
    }

    fn outcome_at(&self, done: Duration, err: Option<FetchError>) -> ObjectOutcome {
        ObjectOutcome {
            intended: None,
            began: self.began,
            // Never sent: it ended where it began, or, unstamped, where it failed.
            sent: self.sent.or(self.began).unwrap_or(done),
            headers: self.headers,
            done,
            body_bytes: self.bytes,
            error: err.map(|e| Box::new((e.kind, e.message))),
            status: self.status,
            stream: self.stream,
        }
    }
}
