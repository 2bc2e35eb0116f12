//! Running as one of many copies: `--shard` (which part of the workload) and `--start-at`
//! (when to begin, on the wall clock, so that copies on many machines begin together).

use std::time::{Duration, Instant, SystemTime};

use qbench_core::report::ShardRecord;
use qbench_core::spec::start::{unix_us, ClockSync, StartRecord};

use crate::observe::Observer;
use crate::plan::config::Config;

/// The resolved barrier: as given, and when.
#[derive(Debug, Clone)]
pub struct Barrier {
    pub given: String,
    pub at: SystemTime,
}

/// What a report says of its shard: the index, where it came from, and its share.
pub(crate) fn record(cfg: &Config, source: Option<&'static str>) -> Option<ShardRecord> {
    let spec = cfg.spec();
    let s = spec.shard?;
    let open = spec
        .load
        .as_ref()
        .and_then(|l| l.rate.map(|r| (r, l.max_inflight)));
    Some(ShardRecord {
        index: s.index,
        count: s.count,
        source: source.map(Into::into),
        connections: s.share(spec.connections.into()) as u32,
        requests: spec.load.is_none().then(|| s.share(cfg.run.total_objects)),
        rate: open.map(|(r, _)| s.rate(r)),
        phase_us: open.map(|(r, _)| s.phase(r).as_micros() as u64),
        max_inflight: open.map(|(_, m)| s.share(m.into()) as u32),
    })
}

/// The kernel's view of the clock's synchronization (adjtimex with no change requested).
pub(crate) fn clock_sync() -> ClockSync {
    // SAFETY: a zeroed timex with modes = 0 asks adjtimex to read, not to set.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return ClockSync::default();
    }
    let name = match state {
        libc::TIME_OK => "ok",
        libc::TIME_INS => "leap_insert",
        libc::TIME_DEL => "leap_delete",
        libc::TIME_OOP => "leap_in_progress",
        libc::TIME_WAIT => "leap_done",
        libc::TIME_ERROR => "unsynchronized",
        _ => "unknown",
    };
    ClockSync {
        state: Some(name.into()),
        synchronized: Some(tx.status & libc::STA_UNSYNC == 0),
        est_error_us: Some(tx.esterror as i64),
        max_error_us: Some(tx.maxerror as i64),
    }
}

/// The last stretch before the barrier is spun, not slept: a timer wakes up late by a
/// millisecond or more on a busy machine (0.4-0.8 ms late starts were seen with 2 ms).
const SPIN: Duration = Duration::from_millis(10);

/// Waits for the barrier on the wall clock and says how close to it this copy started; a
/// barrier already passed is a warning to `to`.
pub(crate) async fn wait(b: &Barrier, to: &crate::observe::Observing) -> StartRecord {
    let now = SystemTime::now();
    let late = now > b.at;
    if let Ok(ahead) = b.at.duration_since(now) {
        if ahead > SPIN {
            tokio::time::sleep(ahead - SPIN).await;
        }
        // Bounded on the monotonic clock too, should the wall clock step back meanwhile.
        let give_up = Instant::now() + SPIN * 4;
        while SystemTime::now() < b.at && Instant::now() < give_up {
            std::hint::spin_loop();
        }
    }
    let started = SystemTime::now();
    let (s, barrier) = (unix_us(started), unix_us(b.at));
    let skew_us = if s >= barrier {
        i64::try_from(s - barrier).unwrap_or(i64::MAX)
    } else {
        -i64::try_from(barrier - s).unwrap_or(i64::MAX)
    };
    if late {
        to.warn(&format!(
            "warning: --start-at: the barrier ({}) had passed {:.3} s before this copy reached it; started at once (recorded as late)",
            b.given,
            skew_us as f64 / 1e6
        ));
    }
    StartRecord {
        at: b.given.clone(),
        barrier_unix_us: barrier,
        started_unix_us: s,
        skew_us,
        late,
        clock: clock_sync(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Observing;
    use std::sync::{Arc, Mutex};

    /// The warnings an observer was given.
    #[derive(Default)]
    struct Warned(Mutex<Vec<String>>);

    impl Observer for Warned {
        fn warn(&self, line: &str) {
            self.0.lock().unwrap().push(line.to_string());
        }
    }

    #[tokio::test]
    async fn a_past_barrier_starts_at_once_and_says_so() {
        let warned = Arc::new(Warned::default());
        let to = Observing::new(warned.clone());
        let b = Barrier {
            given: "1".into(),
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(1),
        };
        let r = wait(&b, &to).await;
        assert!(r.late && r.skew_us > 0);
        assert_eq!(r.barrier_unix_us, 1_000_000);
        // Far enough ahead that a preempted test thread still waits for it.
        let soon = Barrier {
            given: "+500ms".into(),
            at: SystemTime::now() + Duration::from_millis(500),
        };
        let r = wait(&soon, &to).await;
        assert!(!r.late && r.started_unix_us >= r.barrier_unix_us);
        let warned = warned.0.lock().unwrap();
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].starts_with("warning: --start-at: the barrier (1) had passed "),
            "{warned:?}"
        );
    }
}
