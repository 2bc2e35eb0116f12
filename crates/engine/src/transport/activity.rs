//! When bytes last moved on a TCP connection, so that "no progress" is the connection's: a
//! request waiting for an h2 stream (above the server's SETTINGS_MAX_CONCURRENT_STREAMS) is
//! not timed out while its connection keeps moving.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
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
    let start = Instant::now();
    let moved = match activity {
        Some(activity) => Moved::Bytes { activity, start },
        None => Moved::Started(start),
    };
    WhileMoving::new(fut, moved, after, Name::Fixed(what)).await
}

/// Which of a request's steps is under way, and how many times it has moved on (atomics, so
/// that the request's future stays `Send`).
pub(crate) struct Phase {
    at: AtomicUsize,
    names: &'static [&'static str],
    moves: AtomicU64,
}

impl Phase {
    pub(crate) fn new(names: &'static [&'static str]) -> Self {
        Self {
            at: AtomicUsize::new(0),
            names,
            moves: AtomicU64::new(0),
        }
    }

    /// Moves on to step `i` of `names`.
    pub(crate) fn set(&self, i: usize) {
        self.at.store(i, Ordering::Relaxed);
    }

    /// Moves on to step `i`, or stays in it having moved, for a [`Moved::Steps`] timer.
    pub(crate) fn step(&self, i: usize) {
        self.set(i);
        self.moves.fetch_add(1, Ordering::Relaxed);
    }

    fn moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }

    pub(crate) fn name(&self) -> &'static str {
        let at = self.at.load(Ordering::Relaxed);
        self.names.get(at).copied().unwrap_or("request")
    }
}

/// What counts as progress for a [`WhileMoving`].
pub(crate) enum Moved<'a> {
    /// A byte on the connection, from `start` on: exact, as the connection stamps its last
    /// byte.
    Bytes {
        activity: &'a Activity,
        start: Instant,
    },
    /// Nothing but the end, from the instant given.
    Started(Instant),
    /// A [`Phase::step`] from `start` on. Steps are counted, not stamped (a clock read each):
    /// the timer looks when it fires, and if the request moved meanwhile gives it `after` from
    /// then, so the timeout ends a request that made no step for between `after` and twice
    /// that.
    Steps { phase: &'a Phase, start: Instant },
}

/// What a timeout calls the step it stopped.
pub(crate) enum Name<'a> {
    Fixed(&'a str),
    Phase(&'a Phase),
}

pin_project_lite::pin_project! {
    /// A future and its one timer, side by side: an async function taking `fut` would keep
    /// it twice (the argument and the pinned local), and a request's state is what a small
    /// object costs in cache at thousands in flight.
    pub(crate) struct WhileMoving<'a, F> {
        #[pin]
        fut: F,
        #[pin]
        sleep: Option<tokio::time::Sleep>,
        moved: Moved<'a>,
        after: Duration,
        name: Name<'a>,
        // The steps made when the timer was last set ([`Moved::Steps`]).
        seen: u64,
    }
}

impl<'a, F> WhileMoving<'a, F> {
    pub(crate) fn new(fut: F, moved: Moved<'a>, after: Duration, name: Name<'a>) -> Self {
        Self {
            fut,
            sleep: None,
            moved,
            after,
            name,
            seen: 0,
        }
    }
}

impl<T, F: Future<Output = Result<T, FetchError>>> Future for WhileMoving<'_, F> {
    type Output = Result<T, FetchError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(r) = this.fut.poll(cx) {
            return Poll::Ready(r);
        }
        // The timer is set once and moved only when it fires early: a request that ends
        // within `after` registers one timer entry.
        if this.sleep.is_none() {
            let deadline = match this.moved {
                Moved::Bytes { activity, start } => activity.last().max(*start),
                Moved::Started(t) => *t,
                Moved::Steps { phase, start } => {
                    *this.seen = phase.moves();
                    *start
                }
            } + *this.after;
            this.sleep.set(Some(tokio::time::sleep_until(deadline)));
        }
        let Some(mut sleep) = this.sleep.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        while sleep.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            let deadline = match this.moved {
                Moved::Bytes { activity, start } => activity.last().max(*start) + *this.after,
                Moved::Started(t) => *t + *this.after,
                Moved::Steps { phase, .. } => {
                    let moves = phase.moves();
                    if moves == *this.seen {
                        now
                    } else {
                        *this.seen = moves;
                        now + *this.after
                    }
                }
            };
            if deadline <= now {
                let name = match this.name {
                    Name::Fixed(n) => n,
                    Name::Phase(p) => p.name(),
                };
                return Poll::Ready(Err(FetchError::timeout(name, *this.after)));
            }
            sleep.as_mut().reset(deadline);
        }
        Poll::Pending
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
        let moved = Moved::Bytes {
            activity: &a,
            start: Instant::now(),
        };
        let e = WhileMoving::new(steps, moved, after, Name::Phase(&phase))
            .await
            .unwrap_err();
        assert_eq!(e.kind, qbench_core::ErrorKind::Timeout);
        assert!(
            e.message.starts_with("second: no progress for 1s"),
            "{}",
            e.message
        );
    }

    /// Steps 0.6 s apart keep a 1 s timer from firing for 5 s; once they stop, the request
    /// ends as a timeout named for its step, no sooner than 1 s and no later than 2 s on.
    #[tokio::test(start_paused = true)]
    async fn counted_steps_keep_a_request_alive_and_their_end_times_it_out() {
        let after = Duration::from_secs(1);
        let phase = Phase::new(&["first", "second"]);
        let t0 = Instant::now();
        let steps = async {
            for _ in 0..8 {
                tokio::time::sleep(Duration::from_millis(600)).await;
                phase.step(1);
            }
            std::future::pending::<()>().await;
            Ok::<_, FetchError>(())
        };
        let moved = Moved::Steps {
            phase: &phase,
            start: t0,
        };
        let e = WhileMoving::new(steps, moved, after, Name::Phase(&phase))
            .await
            .unwrap_err();
        let last_step = Duration::from_millis(4800);
        let waited = t0.elapsed().saturating_sub(last_step);
        assert!(waited >= after && waited <= 2 * after, "{waited:?}");
        assert_eq!(e.kind, qbench_core::ErrorKind::Timeout);
        assert!(e.message.starts_with("second: "), "{}", e.message);
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_without_progress_to_watch_ends_after_exactly_its_time() {
        let t0 = Instant::now();
        let never = std::future::pending::<Result<(), FetchError>>();
        let after = Duration::from_millis(1500);
        let e = WhileMoving::new(never, Moved::Started(t0), after, Name::Fixed("waiting"))
            .await
            .unwrap_err();
        assert_eq!(t0.elapsed(), after);
        assert!(e.message.starts_with("waiting: "), "{}", e.message);
        let ok = WhileMoving::new(
            async { Ok::<_, FetchError>(3) },
            Moved::Started(t0),
            after,
            Name::Fixed("quick"),
        );
        assert_eq!(ok.await.unwrap(), 3);
    }
}
