//! The monotonic clock every figure is measured with.

use std::time::Duration;

use tokio::time::Instant;

/// Offsets from one monotonic epoch, as the sans-IO recorder expects them. It reads tokio's
/// clock, which is the monotonic clock in a run and a paused, deterministic one in tests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}
