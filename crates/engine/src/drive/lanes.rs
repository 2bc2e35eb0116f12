//! What each object's end writes, kept on its client thread's own cache lines: the count of
//! requests in flight, and the outcomes on their way to the run's recorder, handed over a
//! batch at a time. One recorder lock and one shared in-flight count per object made every
//! object move the same cache lines between the client's cores (at two client threads on h2,
//! 4.7% of the client's CPU per object went to them and to the progress count).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use qbench_core::recorder::ObjectOutcome;
use qbench_core::Recorder;

use crate::drive::lock;
use crate::observe::{Observer, Observing};

/// Outcomes a client thread holds before it hands them to the recorder.
const BATCH: usize = 64;

/// An outcome waits at most this long (by the run's clock, from its lane's last hand-over)
/// for others to join it: a slow run's objects reach the recorder, the progress bar and the
/// live view as they end, and a fast one's 64 at a time.
const HOLD_AT_MOST: Duration = Duration::from_millis(10);

/// How often a run without intervals hands over what waits, so that no outcome waits for
/// the next to end (the tail of a run whose last objects are large).
const DRAIN_EVERY: Duration = Duration::from_millis(250);

/// One client thread's share.
#[derive(Default)]
struct Lane {
    /// Requests started on this thread less those ended on it. A request that ends on
    /// another thread (an unpinned runtime moves tasks) leaves this count wrapped below zero
    /// and that one's above: the sum over lanes, in wrapping arithmetic, is exact.
    in_flight: AtomicU64,
    batch: Mutex<Batch>,
}

#[derive(Default)]
struct Batch {
    outcomes: Vec<ObjectOutcome>,
    /// The latest `done` handed over.
    handed_at: Duration,
}

/// The run's lanes, one per client thread.
pub(crate) struct Lanes {
    lanes: Box<[CachePadded<Lane>]>,
    /// A run of a fixed count of objects shows each on the progress bar as it reaches the
    /// recorder; a held load's bar counts time instead.
    progress: Option<Observing>,
}

impl Lanes {
    pub(crate) fn new(threads: usize, progress: Option<Observing>) -> Self {
        Self {
            lanes: (0..threads.max(1))
                .map(|_| CachePadded::default())
                .collect(),
            progress,
        }
    }

    /// The calling thread's lane: its pinned runtime's, or the first off them.
    fn here(&self) -> &Lane {
        let i = crate::transport::pinned::current_index().unwrap_or(0);
        &self.lanes[i % self.lanes.len()]
    }

    pub(crate) fn started(&self) {
        self.here().in_flight.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ended(&self) {
        self.here().in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Requests in flight on every thread.
    pub(crate) fn in_flight(&self) -> u64 {
        self.lanes.iter().fold(0u64, |sum, l| {
            sum.wrapping_add(l.in_flight.load(Ordering::Relaxed))
        })
    }

    /// Records `o` now or with its batch. A failure goes at once, with what waited before it,
    /// so that the run's first error is the first to happen on any thread.
    pub(crate) fn record(&self, o: ObjectOutcome, rec: &Mutex<Recorder>) {
        let lane = self.here();
        let mut b = lane.batch.lock().expect("lane batch lock");
        let now = o.error.is_some() || o.done.saturating_sub(b.handed_at) >= HOLD_AT_MOST;
        b.outcomes.push(o);
        if now || b.outcomes.len() >= BATCH {
            self.hand_over(&mut b, rec);
        }
    }

    /// Hands every lane's waiting outcomes to the recorder: before an interval ends, and
    /// once the run's requests are done.
    pub(crate) fn drain(&self, rec: &Mutex<Recorder>) {
        for lane in self.lanes.iter() {
            let mut b = lane.batch.lock().expect("lane batch lock");
            if !b.outcomes.is_empty() {
                self.hand_over(&mut b, rec);
            }
        }
    }

    /// The lane's lock is taken before the recorder's, here and only here.
    fn hand_over(&self, b: &mut Batch, rec: &Mutex<Recorder>) {
        let n = b.outcomes.len() as u64;
        let mut r = lock(rec);
        for o in b.outcomes.drain(..) {
            b.handed_at = b.handed_at.max(o.done);
            r.object(o);
        }
        drop(r);
        if let Some(p) = &self.progress {
            p.advanced(n);
        }
    }
}

/// A run without intervals hands over what waits every [`DRAIN_EVERY`].
pub(crate) async fn drain_every(
    lanes: std::sync::Arc<Lanes>,
    rec: std::sync::Arc<Mutex<Recorder>>,
) {
    loop {
        tokio::time::sleep(DRAIN_EVERY).await;
        lanes.drain(&rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::ErrorKind;

    fn done_at(ms: u64, error: bool) -> ObjectOutcome {
        ObjectOutcome {
            intended: None,
            began: None,
            sent: Duration::from_millis(ms),
            headers: Some(Duration::from_millis(ms)),
            done: Duration::from_millis(ms),
            body_bytes: 1,
            error: error.then(|| Box::new((ErrorKind::Status, format!("failed at {ms} ms")))),
            status: Some(200),
            stream: None,
        }
    }

    /// Counts what reached the recorder, by the progress it showed.
    #[derive(Default)]
    struct Shown(AtomicU64);

    impl Observer for Shown {
        fn advanced(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// A recorder fed through `threads` lanes, with the progress they showed.
    struct Fed {
        rec: Mutex<Recorder>,
        seen: std::sync::Arc<Shown>,
        lanes: Lanes,
    }

    impl Fed {
        fn new(threads: usize) -> Self {
            let seen = std::sync::Arc::new(Shown::default());
            Self {
                rec: Mutex::new(Recorder::new(0, 1000, Duration::ZERO)),
                lanes: Lanes::new(threads, Some(Observing::new(seen.clone()))),
                seen,
            }
        }

        fn end(&self, ms: u64, error: bool) {
            self.lanes.record(done_at(ms, error), &self.rec);
        }

        fn shown(&self) -> u64 {
            self.seen.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn a_batch_waits_until_full_or_old_and_a_drain_takes_the_rest() {
        let f = Fed::new(1);
        // The first outcome is 100 ms past the last hand-over (none): it goes at once.
        f.end(100, false);
        assert_eq!(f.shown(), 1);
        for i in 0..(BATCH as u64 - 1) {
            f.end(101 + i / 16, false);
        }
        assert_eq!(f.shown(), 1, "63 outcomes within 10 ms wait");
        f.end(105, false);
        assert_eq!(f.shown(), 1 + BATCH as u64);
        f.end(106, false);
        assert_eq!(f.shown(), 1 + BATCH as u64);
        f.end(105 + 10, false);
        assert_eq!(
            f.shown(),
            3 + BATCH as u64,
            "10 ms after the last hand-over"
        );
        f.end(116, false);
        f.lanes.drain(&f.rec);
        assert_eq!(f.shown(), 4 + BATCH as u64);
    }

    #[test]
    fn a_failure_goes_at_once_and_stays_the_first() {
        let f = Fed::new(2);
        f.end(50, false);
        f.end(51, false);
        f.end(52, true);
        assert_eq!(f.shown(), 3);
        f.end(53, true);
        let report = f
            .rec
            .into_inner()
            .unwrap()
            .finish(Duration::from_millis(60));
        assert_eq!(
            report.first_error.as_deref(),
            Some("status: failed at 52 ms")
        );
        assert_eq!((report.objects.completed, report.objects.failed), (2, 2));
    }

    proptest::proptest! {
        /// Through a lane and a final drain, a run's report is the one that recording each
        /// outcome at its end gives: batches change when, never what or in which order.
        #[test]
        fn batches_change_nothing_the_report_says(
            ends in proptest::collection::vec((0u64..30, proptest::bool::weighted(0.05)), 0..400)
        ) {
            let f = Fed::new(1);
            let direct = Mutex::new(Recorder::new(0, 1000, Duration::ZERO));
            let mut at = 0;
            for (step, error) in ends {
                at += step;
                f.end(at, error);
                lock(&direct).object(done_at(at, error));
            }
            f.lanes.drain(&f.rec);
            let end = Duration::from_millis(at + 1);
            let fed = f.rec.into_inner().unwrap().finish(end);
            let direct = direct.into_inner().unwrap().finish(end);
            proptest::prop_assert_eq!(
                serde_json::to_value(&fed).unwrap(),
                serde_json::to_value(&direct).unwrap()
            );
        }
    }

    #[test]
    fn in_flight_sums_lanes_even_when_a_request_ends_elsewhere() {
        let lanes = Lanes::new(3, None);
        lanes.started();
        lanes.started();
        // Off the pinned runtimes every call is lane 0's; a request moved between threads
        // ends on another lane, leaving that lane's count wrapped below zero.
        lanes.lanes[1].in_flight.fetch_sub(1, Ordering::Relaxed);
        assert_eq!(lanes.in_flight(), 1);
        lanes.ended();
        assert_eq!(lanes.in_flight(), 0);
    }
}
