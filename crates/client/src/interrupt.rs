//! SIGINT while the link, cgroup and servers are being built must not kill the process half
//! way, leaving them behind: from the first build on, SIGINT only raises a flag, which the
//! build checks between its steps (tearing down what it made), and which the run's own wait
//! for SIGINT counts once its listener is in place.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use tokio::signal::unix::{signal, SignalKind};

static HELD: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// From now on SIGINT no longer ends the process by itself (idempotent).
pub(crate) fn hold() -> anyhow::Result<()> {
    if HELD.get().is_some() {
        return Ok(());
    }
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&flag))
        .context("installing a SIGINT handler")?;
    let _ = HELD.set(flag);
    Ok(())
}

/// Whether a SIGINT came since the last look.
pub(crate) fn take() -> bool {
    HELD.get().is_some_and(|f| f.swap(false, Ordering::SeqCst))
}

/// Fails with "interrupted" if a SIGINT came while building.
pub(crate) fn check(what: &str) -> anyhow::Result<()> {
    if take() {
        anyhow::bail!("interrupted (SIGINT) while {what}");
    }
    Ok(())
}

/// The next SIGINT, counting one that came before this listener existed.
pub(crate) async fn sigint() {
    let Ok(mut s) = signal(SignalKind::interrupt()) else {
        // Without a listener the run goes on, as it would without a terminal.
        return std::future::pending().await;
    };
    if take() {
        return;
    }
    s.recv().await;
    // The same signal raised the flag too: it is this one, not a later one.
    take();
}
