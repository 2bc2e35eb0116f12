//! How the engine tells whoever drives it what is happening, without printing: a run reports
//! its progress to an [`Observe`] it is given, and warnings (a barrier already passed, an
//! output that lost a write, telemetry a server did not give) go to the warner the
//! application installs with [`set_warner`].

use std::sync::{Arc, OnceLock};

/// Progress of a run, in the unit its plan counts: objects fetched, or milliseconds held.
pub trait Observe: Send + Sync {
    fn advanced(&self, n: u64);
}

/// What a run reports its progress to.
pub type Observer = Arc<dyn Observe>;

/// An observer for callers that do not show progress.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl Observe for Unobserved {
    fn advanced(&self, _: u64) {}
}

/// An observer that shows nothing.
pub fn unobserved() -> Observer {
    Arc::new(Unobserved)
}

static WARNER: OnceLock<fn(&str)> = OnceLock::new();

/// Sends the engine's warnings to `warner` (one line each, without its newline). The first
/// call wins; without one, warnings go to stderr.
pub fn set_warner(warner: fn(&str)) {
    let _ = WARNER.set(warner);
}

/// A warning for the user, as one line.
pub fn warn(line: &str) {
    match WARNER.get() {
        Some(w) => w(line),
        None => crate::output::stdio::err(&format!("{line}\n")),
    }
}
