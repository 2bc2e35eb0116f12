//! When bytes last moved on a TCP connection, so that "no progress" is the connection's: a
//! request waiting for an h2 stream (above the server's SETTINGS_MAX_CONCURRENT_STREAMS) is
//! not timed out while its connection keeps moving.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub(crate) use qbench_stack::activity::{Activity, Counted};
use tokio::time::Instant;

use super::FetchError;

/// `fut`, ended with a timeout only once it has not finished and nothing has moved for
/// `after`: no byte on the connection, with an `activity`; nothing at all, without one. The
/// count starts at the step's start at the earliest.
pub(crate) async fn step_while_moving<T, E>(
    activity: Option<&Activity>,
    what: &str,
    after: Duration,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, FetchError>
where
    E: std::error::Error + 'static,
{
    let fut = async { fut.await.map_err(|e| FetchError::from_err(what, &e)) };
    while_moving(activity, after, fut, || FetchError::timeout(what, after)).await
}

/// Which of a request's steps is under way (an atomic, so that the request's future stays
/// `Send`).
pub(crate) struct Phase {
    at: AtomicUsize,
    names: &'static [&'static str],
}

impl Phase {
    pub(crate) fn new(names: &'static [&'static str]) -> Self {
        Self {
            at: AtomicUsize::new(0),
            names,
        }
    }

    /// Moves on to step `i` of `names`.
    pub(crate) fn set(&self, i: usize) {
        self.at.store(i, Ordering::Relaxed);
    }

    pub(crate) fn name(&self) -> &'static str {
        let at = self.at.load(Ordering::Relaxed);
        self.names.get(at).copied().unwrap_or("request")
    }
}

/// As [`step_while_moving`] for a series of steps under one timer (one timer entry and one
/// clock read per request rather than per step): `fut` says which step it is in through
/// `phase`, which a timeout names, and words its own errors.
pub(crate) async fn phases_while_moving<T>(
    activity: &Activity,
    phase: &Phase,
    after: Duration,
    fut: impl Future<Output = Result<T, FetchError>>,
) -> Result<T, FetchError> {
    while_moving(Some(activity), after, fut, || {
        FetchError::timeout(phase.name(), after)
    })
    .await
}

async fn while_moving<T>(
    activity: Option<&Activity>,
    after: Duration,
    fut: impl Future<Output = Result<T, FetchError>>,
    timed_out: impl FnOnce() -> FetchError,
) -> Result<T, FetchError> {
    tokio::pin!(fut);
    let start = Instant::now();
    let last = || activity.map_or(start, |a| a.last().max(start));
    loop {
        tokio::select! {
            biased;
            r = &mut fut => return r,
            () = tokio::time::sleep_until(last() + after) => {
                if last() + after <= Instant::now() {
                    return Err(timed_out());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[tokio::test(start_paused = true)]
    async fn a_moving_connection_never_times_out_a_waiting_request() {
        let a = Activity::default();
        let after = Duration::from_secs(1);
        let mover = a.clone();
        // Bytes move every 500 ms for 5 s; the request resolves at 4 s.
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                mover.touch();
            }
        });
        let slow = async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            Ok::<_, io::Error>(7)
        };
        assert_eq!(
            step_while_moving(Some(&a), "waiting", after, slow)
                .await
                .unwrap(),
            7
        );
        // Once nothing moves, the next wait ends after `after`.
        let never = std::future::pending::<Result<(), io::Error>>();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let e = step_while_moving(Some(&a), "waiting", after, never)
            .await
            .unwrap_err();
        assert_eq!(e.kind, qbench_core::ErrorKind::Timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_names_the_phase_it_stopped_in() {
        let a = Activity::default();
        let after = Duration::from_secs(1);
        let phase = Phase::new(&["first", "second"]);
        let steps = async {
            tokio::time::sleep(Duration::from_millis(900)).await;
            phase.set(1);
            std::future::pending::<()>().await;
            Ok::<_, FetchError>(())
        };
        let e = phases_while_moving(&a, &phase, after, steps)
            .await
            .unwrap_err();
        assert_eq!(e.kind, qbench_core::ErrorKind::Timeout);
        assert!(
            e.message.starts_with("second: no progress for 1s"),
            "{}",
            e.message
        );
    }
}
