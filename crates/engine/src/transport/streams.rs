//! The requests a connection has on the wire. For h2 it is also the gate that keeps them
//! within the server's SETTINGS_MAX_CONCURRENT_STREAMS, so that h2 never queues one
//! internally and every object's timer starts when its stream is really opened.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;

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

#[derive(Default)]
struct Count {
    open: usize,
    peak: usize,
}

/// Counts requests on the wire, each let in by `enter` below a limit.
#[derive(Default)]
pub(crate) struct OnWire {
    count: Mutex<Count>,
    freed: Notify,
}

/// One request on the wire; dropping it frees its place and wakes a waiter.
pub(crate) struct Place<'a> {
    wire: &'a OnWire,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.wire.lock().open -= 1;
        self.wire.freed.notify_one();
    }
}

impl OnWire {
    fn lock(&self) -> std::sync::MutexGuard<'_, Count> {
        self.count.lock().expect("stream count lock")
    }

    fn take(count: &mut Count) {
        count.open += 1;
        count.peak = count.peak.max(count.open);
    }

    /// Waits until fewer than `limit()` requests are on the wire. Each freed place wakes one
    /// waiter, and a waiter that finds more room passes the wake on, so a raised limit is
    /// filled without waking every waiter at every release.
    pub(crate) async fn enter(&self, limit: impl Fn() -> usize) -> Place<'_> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                // One reading of the limit: h2's takes its connection's lock.
                let limit = limit();
                let mut c = self.lock();
                if c.open < limit {
                    Self::take(&mut c);
                    let more = c.open < limit;
                    drop(c);
                    if more {
                        self.freed.notify_one();
                    }
                    return Place { wire: self };
                }
            }
            freed.await;
        }
    }

    /// The limit may have risen (the server's SETTINGS arrived): wake a waiter to look.
    pub(crate) fn recheck(&self, limit: usize) {
        if self.lock().open < limit {
            self.freed.notify_one();
        }
    }

    /// The peak since the last call; the next period starts from what is on the wire now.
    pub(crate) fn take_peak(&self) -> u64 {
        let mut c = self.lock();
        let peak = c.peak;
        c.peak = c.open;
        peak as u64
    }
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
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (gate, limit, inside, release) =
                (gate.clone(), limit.clone(), inside.clone(), release.clone());
            tasks.push(tokio::spawn(async move {
                let place = gate.enter(|| limit.load(Ordering::SeqCst)).await;
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
