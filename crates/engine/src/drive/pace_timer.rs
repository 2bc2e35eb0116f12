//! The open loop's timer. tokio's timer ticks in milliseconds and rounds a deadline up to
//! its next tick, which would start every request up to 1 ms late. On the real clock a lane
//! sleeps on a timerfd instead: the kernel's high-resolution timer (no timer slack) makes
//! the fd readable, and the lane's own runtime, which starts the requests, wakes on it.
//! No thread of its own hands requests over, so no wake-up crosses threads. On tokio's
//! paused test clock, tokio's timer does it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::measure::clock::Clock;

/// A lane wakes at most once per quantum and then starts every request due by then: a start
/// is at most this late from pacing, and at 100,000 requests per second a lane still wakes
/// only 10,000 times (a wake-up costs a few microseconds of CPU, more in a VM). The paused
/// test clock has none: there every request starts at its time exactly.
pub(crate) const QUANTUM: Duration = Duration::from_micros(100);

/// tokio registers what `AsRawFd` gives; nix's timer lends its descriptor by `AsFd`.
pub(crate) struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

pub(crate) enum PaceTimer {
    Fd(AsyncFd<Fd>),
    Tokio,
}

impl PaceTimer {
    /// A timer for `clock`, registered with the calling thread's runtime: build it on the
    /// thread whose requests it paces.
    pub(crate) fn new(clock: &Clock) -> io::Result<Self> {
        if !clock.is_real() {
            return Ok(Self::Tokio);
        }
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // SAFETY: the descriptor is the timer's own, open as long as the `AsyncFd` that
        // holds the timer.
        let fd = unsafe { AsyncFd::register_with_interest(Fd(fd), Interest::READABLE) }?;
        Ok(Self::Fd(fd))
    }

    pub(crate) fn quantum(&self) -> Duration {
        match self {
            Self::Fd(_) => QUANTUM,
            Self::Tokio => Duration::ZERO,
        }
    }

    /// Returns at `at` on `clock`, or at once if that has passed.
    pub(crate) async fn sleep_until(&mut self, clock: &Clock, at: Duration) -> io::Result<()> {
        let fd = match self {
            Self::Tokio => {
                tokio::time::sleep_until(clock.at(at)).await;
                return Ok(());
            }
            Self::Fd(fd) => fd,
        };
        let left = at.saturating_sub(clock.now());
        if left.is_zero() {
            return Ok(());
        }
        // Arming anew clears any expiry a dropped sleep left unread (timerfd_settime(2)).
        fd.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(left)),
            TimerSetTimeFlags::empty(),
        )?;
        loop {
            let mut ready = fd.readable().await?;
            // Readiness tokio kept from an expiry since re-armed reads nothing: wait again.
            match ready.try_io(|fd| {
                nix::unistd::read(fd.get_ref().0.as_fd(), &mut [0u8; 8])
                    .map(drop)
                    .map_err(io::Error::from)
            }) {
                Ok(read) => return read,
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    /// A timerfd sleep never returns before its time on the run clock, and a time already
    /// past returns at once (bounded: 20 sleeps of 200 us).
    #[tokio::test]
    async fn a_timerfd_sleep_ends_at_or_after_its_time() {
        let clock = Clock::start();
        let mut t = PaceTimer::new(&clock).unwrap();
        assert!(matches!(t, PaceTimer::Fd(_)));
        for _ in 0..20 {
            let at = clock.now() + Duration::from_micros(200);
            t.sleep_until(&clock, at).await.unwrap();
            assert!(clock.now() >= at);
        }
        let before = clock.now();
        t.sleep_until(&clock, Duration::ZERO).await.unwrap();
        assert!(clock.now() >= before);
    }

    /// A sleep dropped before its expiry leaves nothing behind that would end the next one
    /// early.
    #[tokio::test]
    async fn a_dropped_sleep_does_not_end_the_next_early() {
        let clock = Clock::start();
        let mut t = PaceTimer::new(&clock).unwrap();
        let soon = clock.now() + Duration::from_millis(1);
        let cut = t.sleep_until(&clock, soon).now_or_never();
        assert!(cut.is_none(), "polled once, a 1 ms sleep is pending");
        std::thread::sleep(Duration::from_millis(2));
        let at = clock.now() + Duration::from_millis(5);
        t.sleep_until(&clock, at).await.unwrap();
        assert!(clock.now() >= at);
    }
}
