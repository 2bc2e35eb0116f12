//! SIGINT, SIGTERM and SIGHUP all stop qbench the same way: `timeout`, Slurm's `scancel`,
//! Kubernetes and systemd send SIGTERM, a closed terminal SIGHUP, and each must still get the
//! report (`complete: false`, `aborted` naming the signal) and the teardown that Ctrl-C gets.
//!
//! While the link, cgroup and servers are being built a signal must not kill the process half
//! way, leaving them behind: from the first build on, a signal only records itself, which the
//! build checks between its steps (tearing down what it made), and which the run's own wait
//! for a signal counts once its listener is in place.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use tokio::signal::unix::{signal, SignalKind};

/// The signals that stop a run cleanly.
pub const STOPPING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The last stopping signal not yet taken (0: none).
static HELD: OnceLock<Arc<AtomicI32>> = OnceLock::new();

/// The name a message gives signal `sig`.
pub fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// From now on no stopping signal ends the process by itself (idempotent).
pub fn hold() -> anyhow::Result<()> {
    if HELD.get().is_some() {
        return Ok(());
    }
    let last = Arc::new(AtomicI32::new(0));
    for sig in STOPPING {
        let last = Arc::clone(&last);
        // SAFETY: the action only stores into an atomic, which is async-signal-safe.
        unsafe { signal_hook::low_level::register(sig, move || last.store(sig, Ordering::SeqCst)) }
            .with_context(|| format!("installing a {} handler", name(sig)))?;
    }
    let _ = HELD.set(last);
    Ok(())
}

/// The stopping signal that came since the last look, if any.
pub fn take() -> Option<i32> {
    HELD.get()
        .map(|f| f.swap(0, Ordering::SeqCst))
        .filter(|&s| s != 0)
}

/// Whether a stopping signal came and was not yet taken (it stays to be taken).
pub fn pending() -> bool {
    HELD.get().is_some_and(|f| f.load(Ordering::SeqCst) != 0)
}

/// Fails with "interrupted (SIGNAL) while ..." if a stopping signal came while building.
pub fn check(what: &str) -> anyhow::Result<()> {
    if let Some(sig) = take() {
        anyhow::bail!("interrupted ({}) while {what}", name(sig));
    }
    Ok(())
}

/// Listens for every stopping signal; made once per wait loop so that no signal falls between
/// two waits.
pub struct Listener {
    /// A signal that came after `hold` and before this listener.
    pending: Option<i32>,
    streams: Vec<(i32, tokio::signal::unix::Signal)>,
}

impl Default for Listener {
    fn default() -> Self {
        Self::new()
    }
}

impl Listener {
    /// Without a listener for a signal the run goes on, as it would without a terminal.
    pub fn new() -> Self {
        let streams = [
            (SIGINT, SignalKind::interrupt()),
            (SIGTERM, SignalKind::terminate()),
            (SIGHUP, SignalKind::hangup()),
        ]
        .into_iter()
        .filter_map(|(sig, kind)| signal(kind).ok().map(|s| (sig, s)))
        .collect();
        Self {
            pending: take(),
            streams,
        }
    }

    /// The next stopping signal, counting one that came before this listener existed.
    pub async fn next(&mut self) -> i32 {
        if let Some(sig) = self.pending.take() {
            return sig;
        }
        if self.streams.is_empty() {
            return std::future::pending().await;
        }
        let sig = std::future::poll_fn(|cx| {
            for (sig, s) in &mut self.streams {
                if s.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*sig);
                }
            }
            std::task::Poll::Pending
        })
        .await;
        // The same signal was recorded too: it is this one, so a later listener must not
        // count it again.
        take();
        sig
    }
}

/// The first stopping signal that ends everything: one before `started` was set (while
/// setting up), or the second once the run loop took the first, clearing `started`, to end
/// its runs and still write their report.
pub async fn ending(started: &std::sync::atomic::AtomicBool) -> i32 {
    let mut signals = Listener::new();
    loop {
        let sig = signals.next().await;
        if !started.swap(false, Ordering::Relaxed) {
            return sig;
        }
    }
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
}
