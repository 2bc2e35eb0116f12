//! The monotonic clock every figure is measured with.

use std::time::{Duration, Instant};

/// Offsets from one monotonic epoch, as the sans-IO recorder expects them.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Clock {
            epoch: Instant::now(),
        }
    }

    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}
