//! The requests a connection has on the wire. For h2 it is also the gate that keeps them
//! within the server's SETTINGS_MAX_CONCURRENT_STREAMS, so that h2 never queues one
//! internally and every object's timer starts when its stream is really opened.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Poll;

use qbench_stack::h3_zero_copy::poll_noting_open;

use tokio::sync::{Semaphore, SemaphorePermit};

use super::{BoxFuture, FetchError, RunEnd};

/// What a connection reports about its streams after a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamFacts {
    /// Concurrent request streams the server allows, as it advertised them: h2
    /// SETTINGS_MAX_CONCURRENT_STREAMS, h3 initial_max_streams_bidi; `None` where it set no
    /// limit or it is not known (h1, or no response arrived yet on h2).
    pub peer_limit: Option<u64>,
    /// The most requests that were on the wire at once since the last report.
    pub peak: u64,
    /// What the QUIC stack did on this connection since the last report (h3).
    pub quic: Option<qbench_core::spec::quic_knobs::QuicStats>,
}

/// Counts requests on the wire, each let in by `enter` below a limit that may change. The
/// line is first come, first served: a request the server turned away, sent again on the same
/// connection, waits behind those already waiting but no longer loses every freed place to a
/// request that finished and started the next at once, as it did when any request looking at
/// the right moment got the place.
pub(crate) struct OnWire {
    /// One permit per free place.
    gate: Semaphore,
    /// The limit the permits were last sized to (given out and free together).
    sized: AtomicUsize,
    resizing: Mutex<()>,
    /// Places to take back as they are freed: the limit fell below what was on the wire.
    owed: AtomicUsize,
    on_wire: Opened,
}

/// One request on the wire; dropping it frees its place for the first in line.
pub(crate) struct Place<'a> {
    wire: &'a OnWire,
    permit: Option<SemaphorePermit<'a>>,
    _open: OpenPlace<'a>,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let owed = &self.wire.owed;
        let repaid = owed.load(Ordering::Relaxed) > 0
            && owed
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok();
        if let (true, Some(p)) = (repaid, self.permit.take()) {
            p.forget();
        }
    }
}

impl Default for OnWire {
    fn default() -> Self {
        Self {
            gate: Semaphore::new(0),
            sized: AtomicUsize::new(0),
            resizing: Mutex::new(()),
            owed: AtomicUsize::new(0),
            on_wire: Opened::default(),
        }
    }
}

impl OnWire {
    /// Waits, in line, until fewer than `limit()` requests are on the wire; or, where the
    /// request may be dropped unsent (`until`), until that run ends: `FetchError::cut`.
    pub(crate) async fn enter(
        &self,
        limit: impl Fn() -> usize,
        until: Option<&dyn RunEnd>,
    ) -> Result<Place<'_>, FetchError> {
        // One reading of the limit: h2's takes its connection's lock.
        self.resize(limit());
        // A free place goes to the first in line, so one found free is this request's turn.
        // The gate is never closed: an error cannot come, and would only let the request by.
        let permit = match self.gate.try_acquire() {
            Ok(p) => Some(p),
            Err(_) => match until {
                None => self.gate.acquire().await.ok(),
                Some(u) if u.over() => return Err(FetchError::cut()),
                Some(u) => {
                    let p = tokio::select! {
                        biased;
                        p = self.gate.acquire() => p.ok(),
                        () = u.reached() => return Err(FetchError::cut()),
                    };
                    // The end's timer fires at the clock's next tick, up to a millisecond
                    // late; a place freed in between must not send a request after the end.
                    // Dropped here, the place goes to the next in line, which does the same.
                    if u.over() {
                        return Err(FetchError::cut());
                    }
                    p
                }
            },
        };
        Ok(Place {
            wire: self,
            permit,
            _open: self.on_wire.opened(),
        })
    }

    /// The limit may have changed (the server's SETTINGS arrived): free places are added or
    /// taken back, those on the wire as they end.
    pub(crate) fn recheck(&self, limit: usize) {
        self.resize(limit);
    }

    fn resize(&self, limit: usize) {
        let limit = limit.min(Semaphore::MAX_PERMITS);
        if self.sized.load(Ordering::Acquire) == limit {
            return;
        }
        let _one = self.resizing.lock().expect("stream gate lock");
        let sized = self.sized.load(Ordering::Acquire);
        if limit > sized {
            // What is still owed is forgiven before new places are made.
            let mut more = limit - sized;
            let forgiven = self
                .owed
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                    Some(n.saturating_sub(more))
                })
                .unwrap_or(0);
            more -= forgiven.min(more);
            self.gate.add_permits(more);
        } else {
            let fewer = sized - limit;
            let taken = self.gate.forget_permits(fewer);
            self.owed.fetch_add(fewer - taken, Ordering::AcqRel);
        }
        self.sized.store(limit, Ordering::Release);
    }

    /// The peak since the last call; the next period starts from what is on the wire now.
    pub(crate) fn take_peak(&self) -> u64 {
        self.on_wire.take_peak()
    }
}

/// Drives `opening`, h3's `send_request` (it opens the request's stream and writes the
/// request in one call), giving it up with `FetchError::cut` where `until` ends while the
/// stream is not yet open: the request waits in quinn for the server's stream credit, h3's
/// line as `OnWire::enter` is h2's, and nothing of it was sent. The caller pins `opening` in
/// place: moved in by value, h3's future (over 1 KB) was copied once more per request.
pub(crate) async fn open_unless_ended<F: Future>(
    mut opening: Pin<&mut F>,
    until: Option<&dyn RunEnd>,
) -> Result<F::Output, FetchError> {
    let Some(u) = until else {
        return Ok(opening.await);
    };
    let mut opened = false;
    // Made only for a request that waits, where `reached` boxes its future.
    let mut ended: Option<BoxFuture<'_, ()>> = None;
    let mut first = true;
    poll_fn(|cx| {
        // Woken while not yet open, most likely by stream credit: past the end (its timer
        // below fires up to a millisecond late), the request must not take it.
        if !std::mem::take(&mut first) && !opened && u.over() {
            return Poll::Ready(Err(FetchError::cut()));
        }
        if let Poll::Ready(out) = poll_noting_open(opening.as_mut(), cx, &mut opened) {
            return Poll::Ready(Ok(out));
        }
        if opened {
            return Poll::Pending;
        }
        let end = ended.get_or_insert_with(|| u.reached());
        match end.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(FetchError::cut())),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Counts requests whose streams the transport has already opened (h3: quinn waited for the
/// server's stream credit; h1: one at a time), with no gate: two atomic writes per request
/// where a lock taken and released at each end took four.
#[derive(Default)]
pub(crate) struct Opened {
    open: AtomicUsize,
    peak: AtomicUsize,
}

/// One opened request on the wire; dropping it frees its place.
pub(crate) struct OpenPlace<'a>(&'a Opened);

impl Drop for OpenPlace<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Opened {
    pub(crate) fn opened(&self) -> OpenPlace<'_> {
        let now = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        // Read first: the peak is written only while it rises.
        if now > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        OpenPlace(self)
    }

    /// The peak since the last call; the next period starts from what is on the wire now.
    pub(crate) fn take_peak(&self) -> u64 {
        let now = self.open.load(Ordering::Relaxed);
        self.peak.swap(now, Ordering::Relaxed) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    async fn until(what: &str, test: impl Fn() -> bool) {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while !test() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect(what);
    }

    /// 50 requests held on the wire: a limit of 7 lets exactly 7 in; raising it to 40 lets
    /// exactly 40 in after one recheck; releasing them all lets every request through.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_more_than_the_limit_and_a_raised_limit_is_filled() {
        let gate = Arc::new(OnWire::default());
        let limit = Arc::new(AtomicUsize::new(7));
        let inside = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Semaphore::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (gate, limit, inside, release) =
                (gate.clone(), limit.clone(), inside.clone(), release.clone());
            tasks.push(tokio::spawn(async move {
                let place = gate.enter(|| limit.load(Ordering::SeqCst), None).await;
                inside.fetch_add(1, Ordering::SeqCst);
                release.acquire().await.expect("open").forget();
                inside.fetch_sub(1, Ordering::SeqCst);
                drop(place);
            }));
        }
        until("7 inside", || inside.load(Ordering::SeqCst) == 7).await;
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        assert_eq!(inside.load(Ordering::SeqCst), 7);
        limit.store(40, Ordering::SeqCst);
        gate.recheck(40);
        until("40 inside", || inside.load(Ordering::SeqCst) == 40).await;
        for _ in 0..1000 {
            tokio::task::yield_now().await;
        }
        assert_eq!(inside.load(Ordering::SeqCst), 40);
        release.add_permits(50);
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(gate.take_peak(), 40);
        assert_eq!(gate.take_peak(), 0, "nothing on the wire after the run");
    }

    /// Limit 1: a request waiting when the place is freed gets it before one that comes
    /// after, however fast that one asks.
    #[tokio::test]
    async fn the_first_in_line_gets_the_freed_place() {
        let gate = OnWire::default();
        let first = gate.enter(|| 1, None).await;
        let mut waiting = Box::pin(gate.enter(|| 1, None));
        assert!(waiting.as_mut().now_or_never().is_none());
        drop(first);
        let mut late = Box::pin(gate.enter(|| 1, None));
        assert!(
            late.as_mut().now_or_never().is_none(),
            "a newcomer jumped the line"
        );
        let second = waiting.await;
        assert!(late.as_mut().now_or_never().is_none());
        drop(second);
        drop(late.await);
        assert_eq!(gate.take_peak(), 1);
    }

    /// 4 on the wire when the limit falls to 2: the next waiter gets in only once 3 have
    /// ended; raised to 3 again, one more gets in at once.
    #[tokio::test]
    async fn a_lowered_limit_takes_places_back_as_they_are_freed() {
        let gate = OnWire::default();
        let mut held: Vec<_> = Vec::new();
        for _ in 0..4 {
            held.push(gate.enter(|| 4, None).await);
        }
        gate.recheck(2);
        let mut next = Box::pin(gate.enter(|| 2, None));
        for _ in 0..2 {
            held.pop();
            assert!(next.as_mut().now_or_never().is_none());
        }
        held.pop();
        let in_at_two = next.await;
        let mut another = Box::pin(gate.enter(|| 2, None));
        assert!(another.as_mut().now_or_never().is_none());
        gate.recheck(3);
        let in_at_three = another.await;
        let mut over = Box::pin(gate.enter(|| 3, None));
        assert!(
            over.as_mut().now_or_never().is_none(),
            "3 on the wire, limit 3"
        );
        drop((in_at_two, in_at_three, held));
        drop(over.await);
    }

    /// Limit 1, one on the wire: a request that may be dropped unsent waits until the run's
    /// stop and gives up there, having taken nothing; one let in at once is let in even
    /// after the stop (it is sent), and one that may not be dropped still gets the place.
    #[tokio::test]
    async fn a_waiting_request_gives_up_at_its_runs_end_and_only_a_waiting_one() {
        let gate = OnWire::default();
        let stop = crate::drive::until::Stop::default();
        let first = gate.enter(|| 1, Some(&stop)).await.expect("a free place");
        let mut droppable = Box::pin(gate.enter(|| 1, Some(&stop)));
        let mut kept = Box::pin(gate.enter(|| 1, None));
        assert!(droppable.as_mut().now_or_never().is_none());
        assert!(kept.as_mut().now_or_never().is_none());
        stop.stop();
        let e = droppable.await.err().expect("dropped at the stop");
        assert!(e.cut && !e.unprocessed);
        assert!(kept.as_mut().now_or_never().is_none(), "still in line");
        drop(first);
        let second = kept.await.expect("no end for it");
        drop(second);
        // A free place after the stop: taken, not given up.
        assert!(gate.enter(|| 1, Some(&stop)).await.is_ok());
        // None free after the stop: given up at once.
        let held = gate.enter(|| 1, None).await;
        let e = gate
            .enter(|| 1, Some(&stop))
            .await
            .err()
            .expect("over already");
        assert!(e.cut);
        drop(held);
        assert_eq!(gate.take_peak(), 1);
    }

    /// An end whose timer has not fired yet: over by the clock, `reached` still pending, as
    /// tokio's timer wheel leaves it for up to a millisecond past the end.
    #[derive(Default)]
    struct LateEnd(std::sync::atomic::AtomicBool);

    impl RunEnd for LateEnd {
        fn over(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
        fn reached(&self) -> BoxFuture<'_, ()> {
            Box::pin(std::future::pending())
        }
        fn stopping(&self) -> BoxFuture<'_, ()> {
            Box::pin(std::future::pending())
        }
    }

    /// A place freed after the end, before the end's timer fires, is not taken by a request
    /// waiting in line: each waiter in turn gives up and hands it on, and it is left free.
    #[tokio::test]
    async fn a_place_freed_past_the_end_before_its_timer_sends_nothing() {
        let gate = OnWire::default();
        let end = LateEnd::default();
        let first = gate.enter(|| 1, None).await;
        let mut a = Box::pin(gate.enter(|| 1, Some(&end)));
        let mut b = Box::pin(gate.enter(|| 1, Some(&end)));
        assert!(a.as_mut().now_or_never().is_none());
        assert!(b.as_mut().now_or_never().is_none());
        end.0.store(true, Ordering::SeqCst);
        drop(first);
        assert!(a.await.err().expect("a gave up").cut);
        assert!(b.await.err().expect("b gave up").cut);
        let free = gate.enter(|| 1, None).now_or_never();
        assert!(free.is_some(), "the place was left free");
        assert_eq!(gate.take_peak(), 1);
    }

    /// h3's wait for stream credit: woken past the end, before the end's timer, a request
    /// whose stream is not open gives up without polling its request again.
    #[tokio::test]
    async fn a_stream_credit_past_the_end_is_not_taken() {
        let end = LateEnd::default();
        let polls = AtomicUsize::new(0);
        let credit = Arc::new(tokio::sync::Notify::new());
        let waiting = {
            let (polls, credit) = (&polls, credit.clone());
            async move {
                polls.fetch_add(1, Ordering::SeqCst);
                credit.notified().await;
                polls.fetch_add(1, Ordering::SeqCst);
            }
        };
        let opening = std::pin::pin!(waiting);
        let mut run = Box::pin(open_unless_ended(opening, Some(&end)));
        assert!(run.as_mut().now_or_never().is_none());
        end.0.store(true, Ordering::SeqCst);
        credit.notify_waiters();
        assert!(run.await.expect_err("gave up").cut);
        assert_eq!(
            polls.load(Ordering::SeqCst),
            1,
            "polled again after the end"
        );
    }

    #[test]
    fn opened_counts_without_waiting() {
        let count = Opened::default();
        let a = count.opened();
        let b = count.opened();
        drop(a);
        assert_eq!(count.take_peak(), 2);
        assert_eq!(count.take_peak(), 1);
        drop(b);
        assert_eq!(count.take_peak(), 1, "b was on the wire in this period");
        assert_eq!(count.take_peak(), 0);
    }

    /// Two threads each hold at most 3 places at a time: the peak is between 3 and 6, and
    /// nothing is left on the wire at the end.
    #[test]
    fn opened_from_two_threads_counts_every_place() {
        let count = Opened::default();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        let held: Vec<_> = (0..3).map(|_| count.opened()).collect();
                        drop(held);
                    }
                });
            }
        });
        let peak = count.take_peak();
        assert!((3..=6).contains(&peak), "{peak}");
        assert_eq!(count.take_peak(), 0);
    }
}
