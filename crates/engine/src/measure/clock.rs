//! The monotonic clock every figure is measured with.

use std::time::Duration;

use tokio::time::Instant;

/// Offsets from one monotonic epoch, as the sans-IO recorder expects them. It reads tokio's
/// clock, which is the monotonic clock in a run and a paused, deterministic one in tests.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
    /// The process's monotonic clock, not tokio's paused test clock: an open loop is paced
    /// by a thread of its own, which only the real clock can drive.
    real: bool,
}

impl Clock {
    pub fn start() -> Self {
        Self {
            epoch: Instant::now(),
            real: true,
        }
    }

    /// tokio's clock as a test paused it: everything is paced by tokio's timer.
    #[cfg(test)]
    pub fn paused() -> Self {
        Self {
            epoch: Instant::now(),
            real: false,
        }
    }

    pub fn is_real(&self) -> bool {
        self.real
    }

    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// The instant `offset` after the epoch, to sleep until.
    pub fn at(&self, offset: Duration) -> Instant {
        // A far deadline (a day, say) must not overflow the monotonic clock.
        self.epoch
            .checked_add(offset)
            .unwrap_or_else(|| self.epoch + Duration::from_secs(100 * 365 * 86_400))
    }
}
