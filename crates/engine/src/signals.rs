//! SIGINT, SIGTERM and SIGHUP all stop qbench the same way: `timeout`, Slurm's `scancel`,
//! Kubernetes and systemd send SIGTERM, a closed terminal SIGHUP, and each must still get the
//! report (`complete: false`, `aborted` naming the signal) and the teardown that Ctrl-C gets.
//!
//! A stopping signal is never forgotten: from `hold` on, the handler only counts it, and the
//! count is never reset. Work acts on signals by taking them (`take`), so the ones nobody
//! acted on are known at the end (`untaken`), whenever they came: while the link was built,
//! between two runs, while the report was written, during the teardown. Before, a flag that
//! each wait loop cleared let a signal that came after the runs fall between two listeners.
//!
//! Tokio's signal streams only wake the waiters; the count decides. `hold` registers its
//! handler before any stream exists, and handlers run in the order they were registered, so a
//! woken waiter always finds the count already raised.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::OnceLock;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use tokio::signal::unix::{signal, SignalKind};

/// The signals that stop a run cleanly.
pub const STOPPING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Stopping signals received since `hold`.
static RECEIVED: AtomicU32 = AtomicU32::new(0);
/// Stopping signals some work has acted on.
static TAKEN: AtomicU32 = AtomicU32::new(0);
/// The first and the latest stopping signal (0: none yet).
static FIRST: AtomicI32 = AtomicI32::new(0);
static LATEST: AtomicI32 = AtomicI32::new(0);
/// Whether the handlers are in place, or why not.
static HELD: OnceLock<Result<(), String>> = OnceLock::new();

/// A stopping signal ended the work: `interrupted (SIGINT)`, then when.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("interrupted ({}){}{when}", name(*.sig), if .when.is_empty() { "" } else { " " })]
pub struct Interrupted {
    pub sig: i32,
    /// "during run 3", "while the link was being built"; may be empty.
    pub when: String,
    /// It came before the work took signals itself (building the link, starting servers):
    /// nothing was run or written yet.
    pub before_work: bool,
}

impl Interrupted {
    pub fn new(sig: i32, when: impl Into<String>) -> Self {
        Self {
            sig,
            when: when.into(),
            before_work: false,
        }
    }

    /// One that came before the work took signals itself.
    pub fn before_work(sig: i32, when: impl Into<String>) -> Self {
        Self {
            before_work: true,
            ..Self::new(sig, when)
        }
    }
}

/// The name a message gives signal `sig`.
pub fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// From now on no stopping signal ends the process by itself: each is counted (idempotent).
pub fn hold() -> anyhow::Result<()> {
    let held = HELD.get_or_init(|| {
        for sig in STOPPING {
            let on_signal = move || {
                let _ = FIRST.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                LATEST.store(sig, Ordering::SeqCst);
                RECEIVED.fetch_add(1, Ordering::SeqCst);
            };
            // SAFETY: the action only touches atomics, which is async-signal-safe.
            unsafe { signal_hook::low_level::register(sig, on_signal) }
                .map_err(|e| format!("installing a {} handler: {e}", name(sig)))?;
        }
        Ok(())
    });
    held.clone().map_err(anyhow::Error::msg)
}

/// How many stopping signals came since `hold`.
pub fn received() -> u32 {
    RECEIVED.load(Ordering::SeqCst)
}

/// The first stopping signal, if one came: the one a stopped process is reported as.
pub fn first() -> Option<i32> {
    Some(FIRST.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// The latest stopping signal nobody has acted on yet, marking all of them acted on.
pub fn take() -> Option<i32> {
    let received = RECEIVED.load(Ordering::SeqCst);
    let taken = TAKEN.swap(received, Ordering::SeqCst);
    (received > taken).then(|| LATEST.load(Ordering::SeqCst))
}

/// The latest stopping signal nobody has acted on, left for the next look.
pub fn untaken() -> Option<i32> {
    (RECEIVED.load(Ordering::SeqCst) > TAKEN.load(Ordering::SeqCst))
        .then(|| LATEST.load(Ordering::SeqCst))
}

/// Fails with "interrupted (SIGNAL) while ..." if a stopping signal came at any time.
pub fn check(what: &str) -> Result<(), Interrupted> {
    match first() {
        Some(sig) => {
            take();
            Err(Interrupted::before_work(sig, format!("while {what}")))
        }
        None => Ok(()),
    }
}

/// Wakes when a stopping signal may have come. Without a stream for a signal (tokio could not
/// install one), the count is looked at every 100 ms instead.
pub struct Listener {
    streams: Vec<tokio::signal::unix::Signal>,
}

impl Default for Listener {
    fn default() -> Self {
        Self::new()
    }
}

impl Listener {
    pub fn new() -> Self {
        // Counting first: see the module's documentation.
        let _ = hold();
        let streams = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ]
        .into_iter()
        .filter_map(|kind| signal(kind).ok())
        .collect();
        Self { streams }
    }

    /// The next stopping signal nobody acted on, taking it; one that came before this listener
    /// existed counts.
    pub async fn next(&mut self) -> i32 {
        loop {
            if let Some(sig) = take() {
                return sig;
            }
            self.wake().await;
        }
    }

    /// Once `until` holds of the count of stopping signals received, that count's latest.
    async fn until(&mut self, until: impl Fn(u32) -> bool) -> i32 {
        loop {
            if until(received()) {
                return LATEST.load(Ordering::SeqCst);
            }
            self.wake().await;
        }
    }

    async fn wake(&mut self) {
        if self.streams.len() < STOPPING.len() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            return;
        }
        std::future::poll_fn(|cx| {
            let mut woken = false;
            for s in &mut self.streams {
                // Every ready stream is drained, so that none wakes again for this signal.
                while s.poll_recv(cx).is_ready() {
                    woken = true;
                }
            }
            if woken {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
    }
}

/// The stopping signal that ends everything at once: the first while the work does not take
/// signals itself (`takes_signals` unset, as while it sets up), else the second, once the work
/// took the first to end its runs and still write their report.
pub async fn ending(takes_signals: &std::sync::atomic::AtomicBool) -> i32 {
    let mut signals = Listener::new();
    signals
        .until(|n| n >= 2 || (n >= 1 && !takes_signals.load(Ordering::SeqCst)))
        .await
}

/// Once `n` stopping signals have come since `hold`, the latest.
pub async fn counted(n: u32) -> i32 {
    Listener::new().until(|got| got >= n).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stopping_signal_has_its_name() {
        assert_eq!(name(SIGINT), "SIGINT");
        assert_eq!(name(SIGTERM), "SIGTERM");
        assert_eq!(name(SIGHUP), "SIGHUP");
        assert_eq!(name(0), "a signal");
    }

    #[test]
    fn an_interruption_says_which_signal_and_when() {
        assert_eq!(
            Interrupted::new(SIGTERM, "during run 2").to_string(),
            "interrupted (SIGTERM) during run 2"
        );
        assert_eq!(
            Interrupted::new(SIGINT, "").to_string(),
            "interrupted (SIGINT)"
        );
    }
}
