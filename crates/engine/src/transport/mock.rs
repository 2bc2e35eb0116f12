//! A transport that talks to nobody: connections and responses take scripted times on
//! tokio's clock, which the runner's tests pause, so every figure they see is exact. It
//! serves `/bytes/{n}` with the payload pattern and counts what the runner asked of it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use qbench_core::wire::{parse_bytes_path, payload_byte};
use qbench_core::{ErrorKind, HandshakeInfo};

use super::streams::{OnWire, StreamFacts};
use super::{step, BoxFuture, Connected, Exchange, FetchError, Sink, Transport};
use crate::measure::clock::Clock;

/// What the fake peer does, and when.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub handshake: Duration,
    /// Every connection attempt fails with this kind after `handshake`.
    pub refuse: Option<ErrorKind>,
    /// Request sent -> response headers.
    pub ttfb: Duration,
    /// Response headers -> last body byte.
    pub body: Duration,
    /// Paths whose response never comes: the transport's idle timeout has to end them.
    pub stall: BTreeSet<String>,
    pub timeout: Duration,
    /// Concurrent streams the peer allows, as an h2 server's SETTINGS would say.
    pub max_streams: Option<u64>,
    /// Paths whose response head comes this much later than `ttfb` (a server stall).
    pub slow: Vec<(String, Duration)>,
    /// Requests a connection processes; later ones are refused unprocessed, as after nginx's
    /// `keepalive_requests` (a GOAWAY).
    pub request_limit: Option<usize>,
    /// Connections the peer accepts; later attempts are refused.
    pub connect_limit: Option<usize>,
    /// Requests each connection turns away alone (REFUSED_STREAM) before it processes any.
    pub refused_streams: usize,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            handshake: Duration::from_millis(10),
            refuse: None,
            ttfb: Duration::from_millis(5),
            body: Duration::from_millis(20),
            stall: BTreeSet::new(),
            timeout: Duration::from_secs(1),
            max_streams: None,
            slow: Vec::new(),
            request_limit: None,
            connect_limit: None,
            refused_streams: 0,
        }
    }
}

/// What the runner did to the fake peer.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub connects: AtomicUsize,
    /// Requests refused unprocessed (`Script::request_limit`, `Script::refused_streams`).
    pub refused: AtomicUsize,
    pub closes: AtomicUsize,
    /// The most connections open at once (made and not yet closed), seen at each connect.
    pub peak_open: AtomicUsize,
    /// Per connection: paths in the order their requests went out.
    pub requests: Mutex<Vec<Vec<String>>>,
    /// Per connection: the most requests in flight at once.
    pub peak_in_flight: Mutex<Vec<usize>>,
    /// Per connection: the pinned client threads it was made and its requests ran on
    /// (`None`: another thread).
    pub lanes: Mutex<Vec<BTreeSet<Option<usize>>>>,
}

pub(crate) struct MockTransport {
    script: Script,
    clock: Clock,
    pub seen: Arc<Seen>,
}

impl MockTransport {
    pub(crate) fn new(script: Script, clock: Clock) -> Self {
        Self {
            script,
            clock,
            seen: Arc::default(),
        }
    }
}

struct MockConn {
    id: usize,
    script: Script,
    seen: Arc<Seen>,
    in_flight: AtomicUsize,
    /// Requests this connection was asked to process.
    taken: AtomicUsize,
    turned_away: AtomicUsize,
    on_wire: OnWire,
}

impl Transport for MockTransport {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
        Box::pin(async move {
            tokio::time::sleep(self.script.handshake).await;
            let full = self
                .script
                .connect_limit
                .is_some_and(|n| self.seen.connects.load(Ordering::SeqCst) >= n);
            if let Some(kind) = self.script.refuse.or(full.then_some(ErrorKind::Refused)) {
                return Err(FetchError::new(kind, "mock peer refuses"));
            }
            let id = self.seen.connects.fetch_add(1, Ordering::SeqCst);
            let open = id + 1 - self.seen.closes.load(Ordering::SeqCst);
            self.seen.peak_open.fetch_max(open, Ordering::SeqCst);
            // Each record is the connection's by its id: two connections made at once on two
            // threads may reach here in either order.
            fn at<T: Default>(v: &Mutex<Vec<T>>, id: usize) -> std::sync::MutexGuard<'_, Vec<T>> {
                let mut v = v.lock().unwrap();
                if v.len() <= id {
                    v.resize_with(id + 1, T::default);
                }
                v
            }
            drop(at(&self.seen.requests, id));
            drop(at(&self.seen.peak_in_flight, id));
            let lane = crate::transport::pinned::current_index();
            at(&self.seen.lanes, id)[id].insert(lane);
            Ok(Connected {
                conn: Arc::new(MockConn {
                    id,
                    script: self.script.clone(),
                    seen: self.seen.clone(),
                    in_flight: AtomicUsize::new(0),
                    taken: AtomicUsize::new(0),
                    turned_away: AtomicUsize::new(0),
                    on_wire: OnWire::default(),
                }),
                info: HandshakeInfo {
                    alpn: Some("mock".into()),
                    ..HandshakeInfo::default()
                },
                done: self.clock.now(),
                zero_rtt: None,
            })
        })
    }
}

impl MockConn {
    async fn respond(&self, path: &str, sink: &mut dyn Sink) -> Result<(), FetchError> {
        let t = self.script.timeout;
        let stalled = self.script.stall.contains(path);
        let extra = self
            .script
            .slow
            .iter()
            .find(|(p, _)| p == path)
            .map_or(Duration::ZERO, |(_, d)| *d);
        step("waiting for response headers", t + extra, async {
            if stalled {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(self.script.ttfb + extra).await;
            Ok::<_, std::io::Error>(())
        })
        .await?;
        let Some(Ok(n)) = parse_bytes_path(path) else {
            return sink.headers(StatusCode::NOT_FOUND, &HeaderMap::new());
        };
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
        sink.headers(StatusCode::OK, &headers)?;
        tokio::time::sleep(self.script.body).await;
        let body: Vec<u8> = (0..n).map(payload_byte).collect();
        sink.data(&body)
    }
}

impl Exchange for MockConn {
    async fn request(
        &self,
        uri: &Uri,
        sink: &mut dyn Sink,
        _: super::Dog<'_>,
    ) -> Result<(), FetchError> {
        let limit = self
            .script
            .max_streams
            .map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
        let _place = self.on_wire.enter(|| limit, sink.unsent_until()).await?;
        sink.sending();
        if self.turned_away.fetch_add(1, Ordering::SeqCst) < self.script.refused_streams {
            self.seen.refused.fetch_add(1, Ordering::SeqCst);
            let mut e = FetchError::new(ErrorKind::Reset, "mock peer: REFUSED_STREAM").unsent();
            e.refused = true;
            return Err(e);
        }
        if let Some(max) = self.script.request_limit {
            if self.taken.fetch_add(1, Ordering::SeqCst) >= max {
                self.seen.refused.fetch_add(1, Ordering::SeqCst);
                return Err(FetchError::new(ErrorKind::Reset, "mock peer: GOAWAY").unsent());
            }
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut peak = self.seen.peak_in_flight.lock().unwrap();
            peak[self.id] = peak[self.id].max(now);
        }
        self.seen.requests.lock().unwrap()[self.id].push(uri.path().to_string());
        self.seen.lanes.lock().unwrap()[self.id].insert(crate::transport::pinned::current_index());
        let r = self.respond(uri.path(), sink).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        r
    }

    fn streams(&self) -> StreamFacts {
        StreamFacts {
            peer_limit: self.script.max_streams,
            peak: self.on_wire.take_peak(),
            quic: None,
        }
    }

    fn shut(&self) {
        self.seen.closes.fetch_add(1, Ordering::SeqCst);
    }
}
