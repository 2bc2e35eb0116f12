//! The monotonic clock every figure is measured with.

use std::time::Duration;

use tokio::time::Instant;

/// Offsets from one monotonic epoch, as the sans-IO recorder expects them. It reads tokio's
/// clock, which is the monotonic clock in a run and a paused, deterministic one in tests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
    /// The process's monotonic clock, not tokio's paused test clock: an open loop is paced
    /// by a timerfd, which only the real clock can drive.
    real: bool,
}

impl Clock {
    pub(crate) fn start() -> Self {
        Self {
            epoch: Instant::now(),
            real: true,
        }
    }

    /// tokio's clock as a test paused it: everything is paced by tokio's timer.
    #[cfg(test)]
    pub(crate) fn paused() -> Self {
        Self {
            epoch: Instant::now(),
            real: false,
        }
    }

    pub(crate) fn is_real(&self) -> bool {
        self.real
    }

    pub(crate) fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Where a reading of the process's monotonic clock lies on this one (a thread of the
    /// in-process server took it).
    pub(crate) fn offset_of(&self, t: std::time::Instant) -> Duration {
        Instant::from_std(t).saturating_duration_since(self.epoch)
    }

    /// Where a CLOCK_MONOTONIC reading from another process lies on this clock.
    pub(crate) fn offset_of_monotonic(&self, t: Duration) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid pointer to a timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let now_mono = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
        let now = self.now();
        // epoch (on CLOCK_MONOTONIC) = now_mono - now; the reading lies t - epoch after it.
        (t + now).saturating_sub(now_mono)
    }

    /// The instant `offset` after the epoch, to sleep until.
    pub(crate) fn at(&self, offset: Duration) -> Instant {
        // A far deadline (a day, say) must not overflow the monotonic clock.
        self.epoch
            .checked_add(offset)
            .unwrap_or_else(|| self.epoch + Duration::from_secs(100 * 365 * 86_400))
    }
}
