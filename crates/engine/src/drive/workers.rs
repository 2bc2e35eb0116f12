//! A connection's closed-loop workers, started as soon as it is up: `--streams` of them
//! pull its next request, so concurrency is bounded without a parked task per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use qbench_core::Recorder;
use tokio::task::JoinSet;

use crate::drive::lanes::Lanes;
use crate::drive::requests::Requests;
use crate::drive::until::{Stop, Until};
use crate::measure::clock::Clock;
use crate::transport::verify::DigestBook;
use crate::transport::Conn;
use crate::transport::RunEnd;
use crate::transport::{fetch, fetch_held, Progress, Watchdog};

/// What a connection's workers share: the run's, the connection, and its next request.
struct Connection {
    w: Workers,
    conn: Arc<dyn Conn>,
    next: AtomicU64,
}

/// What every connection's workers share in a run.
#[derive(Clone)]
pub(crate) struct Workers {
    pub requests: Arc<Requests>,
    pub rec: Arc<Mutex<Recorder>>,
    pub book: Arc<DigestBook>,
    /// Where each object's end is counted and its outcome waits for the recorder; they show
    /// on the progress bar from there.
    pub lanes: Arc<Lanes>,
    pub clock: Clock,
    /// Concurrent requests per connection; `None` = all of its objects at once.
    pub streams: Option<usize>,
    /// Connections the objects are spread over, round-robin.
    pub k: u64,
    /// A closed loop held for a time: cycle through the requests until then.
    pub until: Option<Until>,
    /// A signal stops a run of fixed objects too: no request starts after it, and those in
    /// flight end, so that the run so far is reported.
    pub stop: Arc<Stop>,
    /// `--log-requests`.
    pub log: Option<crate::drive::reqlog::LogTo>,
    /// Connection `ci`'s workers run on `pinned.handle(ci)`, the runtime its connection was
    /// made on; `None`: on the calling runtime.
    pub pinned: Option<Arc<crate::transport::pinned::Pinned>>,
}

impl Workers {
    /// Connection `ci`'s workers: its objects are `ci`, `ci + k`, `ci + 2k`...
    pub(crate) fn spawn(&self, ci: u64, conn: &Arc<dyn Conn>, tasks: &mut JoinSet<()>) {
        let (k, total) = (self.k, self.requests.len());
        let mine = match self.until {
            Some(_) => u64::MAX,
            None => total.saturating_sub(ci).div_ceil(k),
        };
        let workers = self.streams.map_or(mine, |s| s as u64).min(mine);
        self.stop.requests_began();
        // One copy for the connection's workers, where a copy each (with the connection's and
        // the counter's handles) was cache lines of every worker's own to read at every
        // request, cold after thousands of other requests; the shared one stays warm.
        let shared = Arc::new(Connection {
            w: self.clone(),
            conn: conn.clone(),
            next: AtomicU64::new(0),
        });
        for _ in 0..workers {
            let s = shared.clone();
            let work = async move {
                let (w, conn, next) = (&s.w, &s.conn, &s.next);
                // The connection is kept from request to request, not taken from its slot
                // (a lock and a reference count) by each.
                let mut held = conn.as_slot().map(|slot| (slot, slot.hold()));
                // One timer for all of the worker's requests, lent to each in turn.
                let mut dog = std::pin::pin!(Watchdog::new());
                // When a request still waiting for a stream is dropped instead of sent.
                let ends: &dyn RunEnd = match &w.until {
                    Some(u) => u,
                    None => &*w.stop,
                };
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let i = ci.wrapping_add(n.wrapping_mul(k));
                    let req = match &w.until {
                        None if w.stop.is_set() => None,
                        None => w.requests.get(i),
                        Some(u) if u.over() || total == 0 => None,
                        Some(_) => w.requests.get(i % total),
                    };
                    let Some(req) = req else {
                        break;
                    };
                    w.lanes.started();
                    let outcome = match &mut held {
                        Some((slot, held)) => {
                            let dog = Some(dog.as_mut());
                            let p = Progress::closed_loop(&w.clock, &req).unsent_until(ends);
                            fetch_held(slot, held, p, &w.book, dog).await
                        }
                        None => Some(fetch(conn.as_ref(), &w.clock, &req, &w.book).await),
                    };
                    w.lanes.ended();
                    // Dropped unsent at the run's end: nothing was asked of the server.
                    let Some(outcome) = outcome else {
                        break;
                    };
                    if let Some(l) = &w.log {
                        l.line(ci, &req.uri, &outcome);
                    }
                    w.lanes.record(outcome, &w.rec);
                }
            };
            // Its state is asked for whole as each wake-up begins (`transport/prefetch.rs`).
            let work = crate::transport::prefetch::Prefetched::new(work);
            match &self.pinned {
                Some(p) => tasks.spawn_on(work, p.handle(ci as usize)),
                None => tasks.spawn(work),
            };
        }
    }
}
