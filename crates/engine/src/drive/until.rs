//! When a held load stops starting requests: at the end of its duration, known once every
//! connection is up, or at a stop (SIGINT, SIGTERM, SIGHUP), after which requests in flight
//! finish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

use crate::measure::clock::Clock;
use crate::transport::reopen::RunEnd;
use crate::transport::BoxFuture;

/// Ends a held load early: no request starts after it.
#[derive(Default)]
pub(crate) struct Stop {
    set: AtomicBool,
    notify: Notify,
    /// The current run has started requests: a stop then ends it with those in flight,
    /// where one still connecting is dropped (a handshake may wait for its timeout).
    begun: AtomicBool,
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
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
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

/// When a held load stops starting requests: at its end, known once every connection is
/// up (the load's clock starts then), or at a stop.
#[derive(Clone)]
pub(crate) struct Until {
    end: Arc<OnceLock<Duration>>,
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
        let _ = self.end.set(end);
    }

    /// The end, once set; `Duration::MAX` before.
    pub(crate) fn end(&self) -> Duration {
        self.end.get().copied().unwrap_or(Duration::MAX)
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
            // The end may be set while this waits (once every connection is up): looked at
            // again at least every 100 ms until then.
            while !self.over() {
                let end = self.end();
                let step = self.clock.at(end.min(self.clock.now() + STEP));
                tokio::select! {
                    () = tokio::time::sleep_until(step) => {}
                    () = self.stop.wait() => {}
                }
            }
        })
    }

    fn stopping(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.stop.wait())
    }
}

/// How often a wait for the end looks whether the end was set.
const STEP: Duration = Duration::from_millis(100);
