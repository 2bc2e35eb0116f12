//! Whether to give up settling or measuring a link: a stopping signal came. A link's own delay
//! sets how long those wait (an echo each way, stragglers for a round trip), and a long one
//! (`rtt=3600s`) must not make a Ctrl-C wait for it. The waits look here every poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a long wait looks at its stop.
pub const POLL: Duration = Duration::from_millis(20);

/// Asked between steps; never stops when none is given.
#[derive(Clone, Default)]
pub struct Stop(Option<Arc<dyn Fn() -> bool + Send + Sync>>);

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Stop(..)"
        } else {
            "Stop(never)"
        })
    }
}

impl Stop {
    /// Stops once `asked` says so.
    pub fn when(asked: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(asked)))
    }

    /// Stops once `flag` is set (`signal_hook::flag::register` sets it on a signal).
    pub fn flag(flag: Arc<AtomicBool>) -> Self {
        Self::when(move || flag.load(Ordering::Relaxed))
    }

    pub fn now(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f())
    }

    /// Sleeps for `d`, or less if asked to stop meanwhile; whether it was.
    pub fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if self.now() {
                return true;
            }
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                return false;
            };
            std::thread::sleep(left.min(POLL));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_flag_ends_a_long_sleep_and_none_never_stops() {
        let flag = Arc::new(AtomicBool::new(false));
        let stop = Stop::flag(flag.clone());
        assert!(!stop.sleep(Duration::from_millis(1)));
        flag.store(true, Ordering::Relaxed);
        // An hour's sleep returns at its first look.
        assert!(stop.sleep(Duration::from_secs(3600)));
        assert!(!Stop::default().now());
        assert!(!Stop::default().sleep(Duration::ZERO));
    }
}
