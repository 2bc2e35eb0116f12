//! A connection that outlives the server's request limit. nginx closes a connection after
//! `keepalive_requests` (GOAWAY on HTTP/2, `Connection: close` on HTTP/1.1), and hypercorn
//! and many proxies do the same. Requests the server says it never processed go again on a
//! new connection, as curl, Go's client and browsers send them, and so do the requests that
//! find a connection closed without a word (an idle timeout, a reset) before they reach the
//! server; what was reopened and how many requests went again is reported, never hidden.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Uri;
use qbench_core::HandshakeInfo;

use super::streams::StreamFacts;
use super::{Conn, Dog, Exchange, FetchError, RunEnd, Sink, Transport, ZeroRtt};
use crate::measure::clock::Clock;

/// How often one request is sent again. Each time, the server did not process it (closed its
/// connection, or refused its stream); a server that refuses everything ends here, not in a
/// loop.
pub(crate) const MAX_RETRIES: u32 = 8;

/// After a failed reopen, the next attempt on the slot waits this long. In a held load the
/// requests that find the connection still dead wait for it and share its outcome, so that
/// a closed loop against a server that went away makes one handshake a second per connection
/// and fails its requests at that pace, not as fast as a refused connect returns (a million
/// errors a second, counted and burning the client's core). A run of fixed objects fails
/// them at once instead: it ends, with each object it could not fetch counted once, where
/// waiting would stretch 200,000 objects on one connection over two days.
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
    /// Reopens of the slot that failed, ever: a request that saw this many before waiting
    /// for its turn and finds more takes the newest's error as its own.
    failures: u64,
}

/// A connection slot: the connection in it now, and how to open the next.
pub(crate) struct Reopening {
    transport: Arc<dyn Transport>,
    clock: Clock,
    current: Mutex<Current>,
    /// `current`'s generation, read without its lock: a caller that holds the connection
    /// (a closed loop's worker) looks here once per request instead of taking the lock and a
    /// reference count.
    generation: AtomicU64,
    /// One handshake at a time: every request a GOAWAY refused waits for the same one.
    reopening: tokio::sync::Mutex<()>,
    opened: Mutex<Vec<Reopened>>,
    retried: AtomicU64,
    /// When the current run's held load stops starting requests: no new attempt on a slot
    /// whose last one failed is made after it. `None` for a run of fixed objects.
    until: Mutex<Option<Arc<dyn RunEnd>>>,
    /// Requests wait for the next attempt (a held load), or fail at once while the last
    /// attempt's failure holds (a run of fixed objects).
    paced: AtomicBool,
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
                failures: 0,
            }),
            generation: AtomicU64::new(0),
            reopening: tokio::sync::Mutex::new(()),
            opened: Mutex::new(Vec::new()),
            retried: AtomicU64::new(0),
            until: Mutex::new(None),
            paced: AtomicBool::new(false),
        }
    }

    /// The run about to use the slot ends as `until` says (`None`: when its objects are
    /// done), and is held for a time (`paced`) or not.
    pub(crate) fn serve_until(&self, until: Option<Arc<dyn RunEnd>>, paced: bool) {
        *self.until.lock().expect("slot end lock") = until;
        self.paced.store(paced, Ordering::Relaxed);
    }

    /// The connection in the slot now, to keep for [`Reopening::exchange_held`].
    pub(crate) fn hold(&self) -> Held {
        let (generation, conn) = self.now();
        Held { generation, conn }
    }

    /// The connection in the slot now, for a request that must not reopen it.
    pub(crate) fn current(&self) -> Arc<dyn Conn> {
        self.now().1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().expect("connection slot lock")
    }

    fn now(&self) -> (u64, Arc<dyn Conn>) {
        let c = self.lock();
        (c.generation, c.conn.clone())
    }

    /// Replaces generation `generation`'s connection, unless another request already did.
    async fn reopen(&self, generation: u64) -> Result<(), FetchError> {
        let seen = self.lock().failures;
        let _turn = self.reopening.lock().await;
        let (pause, failed) = {
            let c = self.lock();
            if c.generation != generation {
                return Ok(());
            }
            match &c.failed {
                // An attempt failed while this request waited for its turn: its outcome.
                Some((_, e)) if c.failures != seen => return Err(e.clone()),
                Some((at, e)) => {
                    let since = self.clock.now().saturating_sub(*at);
                    let pause = FAILED_REOPEN_HOLD.saturating_sub(since);
                    if !pause.is_zero() && !self.paced.load(Ordering::Relaxed) {
                        return Err(e.clone());
                    }
                    (pause, Some(e.clone()))
                }
                None => (Duration::ZERO, None),
            }
        };
        // Waited out holding the turn: the requests behind this one take its attempt's outcome.
        if let Some(e) = failed {
            if !self.wait_out(pause).await {
                return Err(FetchError::new(
                    e.kind,
                    format!("{} (the run ended before another attempt)", e.message),
                ));
            }
        }
        let started = self.clock.now();
        let result = self.transport.connect().await;
        let outcome = match result {
            Ok(c) => {
                let old = {
                    let mut cur = self.lock();
                    cur.generation += 1;
                    cur.failed = None;
                    self.generation.store(cur.generation, Ordering::Release);
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
                let mut c = self.lock();
                c.failed = Some((self.clock.now(), e.clone()));
                c.failures += 1;
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

    /// Sleeps `pause`, cut short where the run stops starting requests; whether the run is
    /// still on, so that another attempt is worth making.
    async fn wait_out(&self, pause: Duration) -> bool {
        let until = self.until.lock().expect("slot end lock").clone();
        let Some(u) = until else {
            tokio::time::sleep(pause).await;
            return true;
        };
        if u.over() {
            return false;
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = u.reached() => {}
        }
        !u.over()
    }
}

/// A request never sent whose run stopped starting requests: it is not to go now.
fn unwanted(sink: &dyn Sink) -> bool {
    sink.unsent_until().is_some_and(|u| u.over())
}

/// A slot's connection as a caller keeps it between requests.
pub(crate) struct Held {
    generation: u64,
    conn: Arc<dyn Conn>,
}

impl Reopening {
    /// `GET uri` on `held`, the slot's connection as last seen (taken anew once the slot has
    /// moved on); a request the server closed the connection without processing goes again
    /// on a new one.
    pub(crate) async fn exchange_held(
        &self,
        held: &mut Held,
        uri: &Uri,
        sink: &mut dyn Sink,
        mut dog: Dog<'_>,
    ) -> Result<(), FetchError> {
        let mut retries = 0;
        loop {
            if self.generation.load(Ordering::Acquire) != held.generation {
                *held = self.hold();
            }
            let e = match held
                .conn
                .exchange(uri, &mut *sink, dog.as_mut().map(|d| d.as_mut()))
                .await
            {
                Err(e) if e.unprocessed && !sink.answered() => e,
                other => return other,
            };
            if e.refused {
                // The server turned the stream away and keeps the connection (its stream limit,
                // unknown until its SETTINGS, or load): the request goes again on it, where a
                // new connection would meet the same limit before its SETTINGS.
                self.turned_away(e, retries)?;
            } else {
                // Never sent (its connection died first), it is dropped once its run stops
                // starting requests, as one waiting for a stream is: not sent after the end.
                if unwanted(sink) {
                    return Err(FetchError::cut());
                }
                let droppable = sink.unsent_until().is_some();
                // Boxed: the rare path's future (a lock's wait and a handshake) would
                // otherwise size every request's.
                let moved = Box::pin(self.again(e, held.generation, retries, droppable)).await;
                match moved {
                    Err(_) | Ok(()) if unwanted(sink) => return Err(FetchError::cut()),
                    Err(e) => return Err(e),
                    Ok(()) => self.retried.fetch_add(1, Ordering::Relaxed),
                };
            }
            sink.again();
            retries += 1;
        }
    }

    /// A request sent `retries` times again that the server turned away once more: it goes
    /// again, or, after `MAX_RETRIES`, fails with `e`.
    fn turned_away(&self, e: FetchError, retries: u32) -> Result<(), FetchError> {
        if retries == MAX_RETRIES {
            return Err(FetchError::new(
                e.kind,
                format!(
                    "{} (the server did not process this request in {} attempts)",
                    e.message,
                    MAX_RETRIES + 1
                ),
            ));
        }
        self.retried.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// After the server closed generation `generation`'s connection without processing a
    /// request sent `retries` times again: a new connection for it to go on, or why not. A
    /// request never sent (`droppable`) stops waiting for it at the run's end, too.
    async fn again(
        &self,
        e: FetchError,
        generation: u64,
        retries: u32,
        droppable: bool,
    ) -> Result<(), FetchError> {
        if retries == MAX_RETRIES {
            return self.turned_away(e, retries);
        }
        // A stop ends the wait for a new connection at once, handshake and all: a signal
        // must not wait for a dead server's timeout. The abandoned attempt is not counted.
        let until = self.until.lock().expect("slot end lock").clone();
        let reopened = match until {
            Some(u) => tokio::select! {
                biased;
                () = if droppable { u.reached() } else { u.stopping() } => None,
                r = self.reopen(generation) => Some(r),
            },
            None => Some(self.reopen(generation).await),
        };
        let Some(reopened) = reopened else {
            return Err(FetchError::new(
                e.kind,
                format!(
                    "{} (the run was stopped before it could go on a new connection)",
                    e.message
                ),
            ));
        };
        if let Err(r) = reopened {
            return Err(FetchError::new(
                r.kind,
                format!(
                    "{}; the server closed the connection and a new one failed: {}",
                    e.message, r.message
                ),
            ));
        }
        Ok(())
    }
}

impl Exchange for Reopening {
    async fn request(
        &self,
        uri: &Uri,
        sink: &mut dyn Sink,
        dog: Dog<'_>,
    ) -> Result<(), FetchError> {
        self.exchange_held(&mut self.hold(), uri, sink, dog).await
    }

    fn as_slot(&self) -> Option<&Reopening> {
        Some(self)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::verify::DigestBook;
    use crate::transport::{fetch, fetch_held, BoxFuture, Connected, ObjectReq, Progress};

    /// Every request fails as one the server never processed, after the response's head
    /// when `head_first`; counts the requests it saw.
    struct Refusing {
        head_first: bool,
        seen: AtomicU64,
    }

    impl Exchange for Refusing {
        async fn request(
            &self,
            _: &Uri,
            sink: &mut dyn Sink,
            _: Dog<'_>,
        ) -> Result<(), FetchError> {
            self.seen.fetch_add(1, Ordering::SeqCst);
            sink.sending();
            if self.head_first {
                sink.headers(http::StatusCode::OK, &http::HeaderMap::new())?;
            }
            Err(FetchError::new(qbench_core::ErrorKind::Reset, "GOAWAY").unsent())
        }

        fn streams(&self) -> StreamFacts {
            StreamFacts::default()
        }
    }

    /// Opens connections that answer the whole body (one byte) and counts them.
    struct Fresh(AtomicU64);

    struct Answering;

    impl Exchange for Answering {
        async fn request(
            &self,
            _: &Uri,
            sink: &mut dyn Sink,
            _: Dog<'_>,
        ) -> Result<(), FetchError> {
            sink.sending();
            sink.headers(http::StatusCode::OK, &http::HeaderMap::new())?;
            sink.data(b"x")
        }

        fn streams(&self) -> StreamFacts {
            StreamFacts::default()
        }
    }

    impl Transport for Fresh {
        fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Ok(Connected {
                    conn: Arc::new(Answering),
                    info: HandshakeInfo::default(),
                    done: Duration::ZERO,
                    zero_rtt: None,
                })
            })
        }
    }

    fn slot(head_first: bool) -> (Arc<Refusing>, Arc<Fresh>, Reopening) {
        let first = Arc::new(Refusing {
            head_first,
            seen: AtomicU64::new(0),
        });
        let fresh = Arc::new(Fresh(AtomicU64::new(0)));
        let slot = Reopening::new(fresh.clone(), Clock::paused(), first.clone());
        (first, fresh, slot)
    }

    fn one_byte() -> ObjectReq {
        ObjectReq {
            uri: "https://h:1/bytes/1".parse().unwrap(),
            expected_len: Some(1),
            verify: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_refused_before_any_answer_goes_again_on_a_new_connection() {
        let (first, fresh, slot) = slot(false);
        let out = fetch(&slot, &Clock::paused(), &one_byte(), &DigestBook::default()).await;
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(out.body_bytes, 1);
        assert_eq!(first.seen.load(Ordering::SeqCst), 1);
        assert_eq!(fresh.0.load(Ordering::SeqCst), 1);
        assert_eq!(Exchange::reopens(&slot).retried, 1);
        // A caller that kept the first connection takes the new one.
        let mut held = Held {
            generation: 0,
            conn: first.clone(),
        };
        let req = one_byte();
        let mut p = Progress::start(&slot.clock, &req);
        slot.exchange_held(&mut held, &req.uri, &mut p, None)
            .await
            .unwrap();
        assert_eq!(first.seen.load(Ordering::SeqCst), 1);
        assert_eq!(held.generation, 1);
        // The retry's timers start from its own sending, not from the first attempt's.
        let (_, _, slot) = self::slot(false);
        let mut p = Progress::start(&slot.clock, &req);
        assert!(p.stamped().is_some());
        slot.exchange_held(&mut slot.hold(), &req.uri, &mut p, None)
            .await
            .unwrap();
        assert!(p.answered() && p.stamped().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connections_own_figures_are_asked_on_it_and_never_reopen_it() {
        let (first, fresh, slot) = slot(false);
        let uri = one_byte().uri;
        let e = crate::transport::get_body(&slot, &uri, 100)
            .await
            .unwrap_err();
        assert!(e.unprocessed, "{e}");
        assert_eq!(first.seen.load(Ordering::SeqCst), 1);
        assert_eq!(fresh.0.load(Ordering::SeqCst), 0, "nothing reopened");
        assert!(Exchange::reopens(&slot).opened.is_empty());
    }

    /// Waits 3 ms (for a stream, say), then is sent and answered 2 ms later, or fails there
    /// unsent when `fails`.
    struct Waiting {
        fails: bool,
    }

    impl Exchange for Waiting {
        async fn request(
            &self,
            _: &Uri,
            sink: &mut dyn Sink,
            _: Dog<'_>,
        ) -> Result<(), FetchError> {
            tokio::time::sleep(Duration::from_millis(3)).await;
            if self.fails {
                return Err(FetchError::new(qbench_core::ErrorKind::Reset, "reset"));
            }
            sink.sending();
            tokio::time::sleep(Duration::from_millis(2)).await;
            sink.headers(http::StatusCode::OK, &http::HeaderMap::new())?;
            sink.data(b"x")
        }

        fn streams(&self) -> StreamFacts {
            StreamFacts::default()
        }
    }

    /// A closed loop's request reads no clock as it is taken up: it is timed from its sending,
    /// exactly as one that did, and one that fails unsent lies where it failed.
    #[tokio::test(start_paused = true)]
    async fn a_closed_loop_request_is_timed_from_its_sending() {
        let ms = Duration::from_millis;
        let req = one_byte();
        for fails in [false, true] {
            let fresh = Arc::new(Fresh(AtomicU64::new(0)));
            let slot = Reopening::new(fresh, Clock::paused(), Arc::new(Waiting { fails }));
            let p = Progress::closed_loop(&slot.clock, &req);
            assert!(
                p.stamped().is_none(),
                "nothing to time from before it is sent"
            );
            let book = DigestBook::default();
            let closed = fetch_held(&slot, &mut slot.hold(), p, &book, None)
                .await
                .expect("no end to drop it at");
            let open = fetch(&slot, &slot.clock, &req, &book).await;
            // The open loop's request is taken up as the closed loop's ends.
            let t = closed.done;
            assert_eq!((closed.began, open.began), (None, Some(t)));
            assert_eq!(closed.error.is_some(), fails);
            if fails {
                assert_eq!((closed.sent, t), (ms(3), ms(3)));
                assert_eq!(open.sent, t, "never sent: it lies where it was taken up");
            } else {
                let (sent, headers) = (closed.sent, closed.headers);
                assert_eq!((sent, headers, t), (ms(3), Some(ms(5)), ms(5)));
                assert_eq!((open.sent, open.headers), (t + ms(3), Some(t + ms(5))));
                assert_eq!(closed.body_bytes, 1);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_answered_in_part_is_never_sent_again() {
        let (first, fresh, slot) = slot(true);
        let out = fetch(&slot, &Clock::paused(), &one_byte(), &DigestBook::default()).await;
        let (kind, message) = *out.error.expect("the refusal is the outcome");
        assert_eq!(kind, qbench_core::ErrorKind::Reset);
        assert!(message.contains("GOAWAY"), "{message}");
        assert_eq!(out.status, Some(200));
        assert_eq!(first.seen.load(Ordering::SeqCst), 1);
        assert_eq!(fresh.0.load(Ordering::SeqCst), 0);
        assert_eq!(Exchange::reopens(&slot).retried, 0);
    }
}

#[cfg(test)]
mod paced_tests;
