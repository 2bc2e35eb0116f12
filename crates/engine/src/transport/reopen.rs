//! A connection that outlives the server's request limit. nginx closes a connection after
//! `keepalive_requests` (GOAWAY on HTTP/2, `Connection: close` on HTTP/1.1), and hypercorn
//! and many proxies do the same. Requests the server says it never processed go again on a
//! new connection, as curl, Go's client and browsers send them; what was reopened and how
//! many requests went again is reported, never hidden.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Uri;
use qbench_core::HandshakeInfo;

use super::streams::StreamFacts;
use super::{Conn, Exchange, FetchError, Sink, Transport, ZeroRtt};
use crate::measure::clock::Clock;

/// How often one request is sent again. Each time, the server closed a connection without
/// processing it; a server that refuses everything ends here, not in a loop.
pub(crate) const MAX_RETRIES: u32 = 8;

/// After a failed reopen, the requests that find the connection still dead fail with that
/// error for this long instead of each waiting for a handshake of its own.
const FAILED_REOPEN_HOLD: Duration = Duration::from_secs(1);

/// A connection opened in place of one the server closed.
pub(crate) struct Reopened {
    /// When it started, on the run clock.
    pub started: Duration,
    pub outcome: Result<Replacement, FetchError>,
}

pub(crate) struct Replacement {
    /// When its handshake completed, on the run clock.
    pub done: Duration,
    pub info: HandshakeInfo,
    pub zero_rtt: Option<ZeroRtt>,
    /// What the connection it replaced saw of streams, up to its replacement.
    pub previous: StreamFacts,
}

/// What replaced a connection, in order, and how many requests went again.
#[derive(Default)]
pub(crate) struct Reopens {
    pub opened: Vec<Reopened>,
    pub retried: u64,
}

struct Current {
    generation: u64,
    conn: Arc<dyn Conn>,
    /// The last reopen of this generation failed: when, and why.
    failed: Option<(Duration, FetchError)>,
}

/// A connection slot: the connection in it now, and how to open the next.
pub(crate) struct Reopening {
    transport: Arc<dyn Transport>,
    clock: Clock,
    current: Mutex<Current>,
    /// One handshake at a time: every request a GOAWAY refused waits for the same one.
    reopening: tokio::sync::Mutex<()>,
    opened: Mutex<Vec<Reopened>>,
    retried: AtomicU64,
}

impl Reopening {
    pub(crate) fn new(transport: Arc<dyn Transport>, clock: Clock, conn: Arc<dyn Conn>) -> Self {
        Self {
            transport,
            clock,
            current: Mutex::new(Current {
                generation: 0,
                conn,
                failed: None,
            }),
            reopening: tokio::sync::Mutex::new(()),
            opened: Mutex::new(Vec::new()),
            retried: AtomicU64::new(0),
        }
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().expect("connection slot lock")
    }

    fn now(&self) -> (u64, Arc<dyn Conn>) {
        let c = self.current();
        (c.generation, c.conn.clone())
    }

    /// Replaces generation `generation`'s connection, unless another request already did.
    async fn reopen(&self, generation: u64) -> Result<(), FetchError> {
        let _turn = self.reopening.lock().await;
        {
            let c = self.current();
            if c.generation != generation {
                return Ok(());
            }
            if let Some((at, e)) = &c.failed {
                if self.clock.now().saturating_sub(*at) < FAILED_REOPEN_HOLD {
                    return Err(e.clone());
                }
            }
        }
        let started = self.clock.now();
        let result = self.transport.connect().await;
        let outcome = match result {
            Ok(c) => {
                let old = {
                    let mut cur = self.current();
                    cur.generation += 1;
                    cur.failed = None;
                    std::mem::replace(&mut cur.conn, c.conn)
                };
                // The old connection ends when its last request does: streams the server
                // accepted before closing it are still being answered.
                Ok(Replacement {
                    done: c.done,
                    info: c.info,
                    zero_rtt: c.zero_rtt,
                    previous: old.streams(),
                })
            }
            Err(e) => {
                self.current().failed = Some((self.clock.now(), e.clone()));
                Err(e)
            }
        };
        let back = outcome.as_ref().map(|_| ()).map_err(Clone::clone);
        self.opened
            .lock()
            .expect("reopen log lock")
            .push(Reopened { started, outcome });
        back
    }
}

/// Passes a response through, noting whether any of it arrived: a request the server
/// answered, even in part, is never sent again.
struct Watch<'a> {
    inner: &'a mut dyn Sink,
    answered: bool,
    /// A retry: the sink's stamps are the first attempt's, too early for this one's timers.
    again: bool,
}

impl Sink for Watch<'_> {
    fn sending(&mut self) {
        self.inner.sending();
    }

    fn stream(&mut self, id: u64) {
        self.inner.stream(id);
    }

    fn headers(
        &mut self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
    ) -> Result<(), FetchError> {
        self.answered = true;
        self.inner.headers(status, headers)
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), FetchError> {
        self.answered = true;
        self.inner.data(chunk)
    }

    fn stamped(&self) -> Option<tokio::time::Instant> {
        if self.again {
            None
        } else {
            self.inner.stamped()
        }
    }
}

impl Exchange for Reopening {
    async fn request(&self, uri: &Uri, sink: &mut dyn Sink) -> Result<(), FetchError> {
        let mut retries = 0;
        loop {
            let (generation, conn) = self.now();
            let mut watch = Watch {
                inner: &mut *sink,
                answered: false,
                again: retries > 0,
            };
            let e = match conn.exchange(uri, &mut watch).await {
                Err(e) if e.unprocessed && !watch.answered => e,
                other => return other,
            };
            if retries == MAX_RETRIES {
                return Err(FetchError::new(
                    e.kind,
                    format!(
                        "{} (the server closed {} connections without processing this request)",
                        e.message,
                        MAX_RETRIES + 1
                    ),
                ));
            }
            if let Err(r) = self.reopen(generation).await {
                return Err(FetchError::new(
                    r.kind,
                    format!(
                        "{}; the server closed the connection and a new one failed: {}",
                        e.message, r.message
                    ),
                ));
            }
            retries += 1;
            self.retried.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn streams(&self) -> StreamFacts {
        self.now().1.streams()
    }

    fn shut(&self) {
        self.now().1.close();
    }

    fn reopens(&self) -> Reopens {
        Reopens {
            opened: std::mem::take(&mut *self.opened.lock().expect("reopen log lock")),
            retried: self.retried.swap(0, Ordering::Relaxed),
        }
    }
}
