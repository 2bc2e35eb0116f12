//! When a held load stops starting requests: at the end of its duration, known once every
//! connection is up, or at a stop (SIGINT, SIGTERM, SIGHUP), after which requests in flight
//! finish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

use crate::measure::clock::Clock;
use crate::transport::BoxFuture;
use crate::transport::RunEnd;

/// Ends a held load early: no request starts after it.
#[derive(Default)]
pub(crate) struct Stop {
    notify: Notify,
    /// The current run has started requests: a stop then ends it with those in flight,
    /// where one still connecting is dropped (a handshake may wait for its timeout).
    begun: AtomicBool,
    /// When the stop came (set once: it is the stop): a held load's window ends there.
    at: OnceLock<std::time::Instant>,
}

impl Stop {
    /// A run begins: nothing started yet.
    pub(crate) fn new_run(&self) {
        self.begun.store(false, Ordering::Relaxed);
    }

    /// A connection's requests start.
    pub(crate) fn requests_began(&self) {
        self.begun.store(true, Ordering::Relaxed);
    }

    pub(crate) fn have_requests_begun(&self) -> bool {
        self.begun.load(Ordering::Relaxed)
    }

    pub(crate) fn stop(&self) {
        let _ = self.at.set(tokio::time::Instant::now().into_std());
        self.notify.notify_waiters();
    }

    /// When `stop` was first called.
    pub(crate) fn stopped_at(&self) -> Option<std::time::Instant> {
        self.at.get().copied()
    }

    pub(crate) fn is_set(&self) -> bool {
        self.at.get().is_some()
    }

    /// Resolves once `stop` was called (at once if it already was).
    pub(crate) async fn wait(&self) {
        let n = self.notify.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        if !self.is_set() {
            n.await;
        }
    }
}

/// A run of fixed objects stops starting requests at a stop alone.
impl RunEnd for Stop {
    fn over(&self) -> bool {
        self.is_set()
    }

    fn reached(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait())
    }

    fn stopping(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait())
    }
}

/// When a held load stops starting requests: at its end, known once every connection is
/// up (the load's clock starts then), or at a stop.
#[derive(Clone)]
pub(crate) struct Until {
    end: Arc<End>,
    pub stop: Arc<Stop>,
    pub clock: Clock,
}

impl Until {
    pub(crate) fn new(stop: Arc<Stop>, clock: Clock) -> Self {
        Self {
            end: Arc::default(),
            stop,
            clock,
        }
    }

    pub(crate) fn set_end(&self, end: Duration) {
        let _ = self.end.at.set(end);
        self.end.set.notify_waiters();
    }

    /// The end, once set; `Duration::MAX` before.
    pub(crate) fn end(&self) -> Duration {
        self.end.at.get().copied().unwrap_or(Duration::MAX)
    }

    pub(crate) fn over(&self) -> bool {
        self.stop.is_set() || self.clock.now() >= self.end()
    }
}

impl RunEnd for Until {
    fn over(&self) -> bool {
        Self::over(self)
    }

    fn reached(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                // Enabled before the end is read, so an end set in between still wakes this.
                let set = self.end.set.notified();
                tokio::pin!(set);
                set.as_mut().enable();
                if self.over() {
                    return;
                }
                match self.end.at.get() {
                    Some(&end) => tokio::select! {
                        () = tokio::time::sleep_until(self.clock.at(end)) => {}
                        () = self.stop.wait() => {}
                    },
                    None => tokio::select! {
                        () = set => {}
                        () = self.stop.wait() => {}
                    },
                }
            }
        })
    }

    fn stopping(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.stop.wait())
    }
}

/// A held load's end, set once every connection is up; waiters of the end hear when it is set.
#[derive(Default)]
struct End {
    at: OnceLock<Duration>,
    set: Notify,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_end_set_while_waiting_is_heard_and_kept() {
        let clock = Clock::paused();
        let until = Until::new(Arc::new(Stop::default()), clock);
        let setter = until.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            setter.set_end(Duration::from_millis(700));
        });
        until.reached().await;
        assert_eq!(clock.now(), Duration::from_millis(700));
        assert!(until.over());
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_end_only_a_stop_ends_the_wait() {
        let clock = Clock::paused();
        let stop = Arc::new(Stop::default());
        let until = Until::new(stop.clone(), clock);
        let waited = tokio::time::timeout(Duration::from_secs(3600), until.reached()).await;
        assert!(
            waited.is_err(),
            "no end and no stop: still waiting after an hour"
        );
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            stop.stop();
        });
        let start = clock.now();
        until.reached().await;
        assert_eq!(clock.now() - start, Duration::from_secs(5));
    }
}
