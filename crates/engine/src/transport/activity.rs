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

    /// Moves on to step `i`, or stays in it having moved, for a [`Moved::Steps`] timer. The
    /// request's own future is the only writer, so the count is a load and a plain store: a
    /// locked add is a full barrier, three times for a small object.
    pub(crate) fn step(&self, i: usize) {
        self.set(i);
        let moves = self.moves.load(Ordering::Relaxed);
        self.moves.store(moves.wrapping_add(1), Ordering::Relaxed);
    }

    fn moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }

    /// The step it is at, an index into `names`.
    pub(crate) fn at(&self) -> usize {
        self.at.load(Ordering::Relaxed)
    }

    pub(crate) fn name(&self) -> &'static str {
        let at = self.at();
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

impl Moved<'_> {
    /// When a request that has not finished times out, judged as its timer is first set;
    /// `seen` takes the steps made so far.
    fn first_deadline(&self, seen: &mut u64, after: Duration) -> Instant {
        let from = match self {
            Moved::Bytes { activity, start } => activity.last().max(*start),
            Moved::Started(t) => *t,
            Moved::Steps { phase, start } => {
                *seen = phase.moves();
                *start
            }
        };
        from + after
    }

    /// When it times out, judged as its timer fires at `now`: `now` itself if it has not
    /// moved since `seen` steps (nor `began` anew).
    fn deadline_at(&self, now: Instant, seen: &mut u64, began: bool, after: Duration) -> Instant {
        match self {
            Moved::Bytes { activity, start } => activity.last().max(*start) + after,
            Moved::Started(t) => *t + after,
            Moved::Steps { phase, .. } => {
                let moves = phase.moves();
                if moves == *seen && !began {
                    now
                } else {
                    *seen = moves;
                    now + after
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A timer that a closed loop's worker lends to its requests in turn, set once and moved
    /// on only when it fires: a timer per request was an insertion into tokio's wheel and a
    /// removal from it, 4% of an h3 client's CPU per small object. When it fires, the
    /// request under way is judged as its own timer would judge it; a request begun since
    /// it was set counts as a step, so a request that makes no step still times out between
    /// `after` and twice that after its last one.
    pub(crate) struct Watchdog {
        #[pin]
        sleep: Option<tokio::time::Sleep>,
        seen: u64,
        began: bool,
    }
}

impl Watchdog {
    pub(crate) fn new() -> Self {
        Self {
            sleep: None,
            seen: 0,
            began: false,
        }
    }

    /// Whether the request that `moved` watches has timed out; `first` on its first poll.
    fn timed_out(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        moved: &Moved<'_>,
        after: Duration,
        first: bool,
    ) -> bool {
        let mut this = self.project();
        *this.began |= first;
        match this.sleep.as_ref().get_ref() {
            None => {
                let deadline = moved.first_deadline(this.seen, after);
                *this.began = false;
                this.sleep.set(Some(tokio::time::sleep_until(deadline)));
            }
            // Set, polled once (which made its entry and left the task's waker with it, the
            // poll being free of the task's budget) and not yet fired: polling it again would
            // only cost the request a few cache lines.
            Some(sleep) if !sleep.is_elapsed() => return false,
            Some(_) => {}
        }
        let Some(mut sleep) = this.sleep.as_pin_mut() else {
            return false;
        };
        // Out of tokio's budget a poll would return before making the timer's entry, and the
        // check above would then never poll it again: no request of the worker's would time out.
        while Pin::new(&mut tokio::task::coop::unconstrained(sleep.as_mut()))
            .poll(cx)
            .is_ready()
        {
            let now = Instant::now();
            let began = std::mem::take(this.began);
            let deadline = moved.deadline_at(now, this.seen, began, after);
            if deadline <= now {
                return true;
            }
            sleep.as_mut().reset(deadline);
        }
        false
    }
}

/// A caller's [`Watchdog`], where it lends one.
pub(crate) type Dog<'a> = Option<Pin<&'a mut Watchdog>>;

pin_project_lite::pin_project! {
    /// A future and its one timer, side by side: an async function taking `fut` would keep
    /// it twice (the argument and the pinned local), and a request's state is what a small
    /// object costs in cache at thousands in flight.
    pub(crate) struct WhileMoving<'a, F> {
        #[pin]
        fut: F,
        #[pin]
        sleep: Option<tokio::time::Sleep>,
        // A lent timer, used instead of `sleep`, and whether this request has polled it.
        dog: Dog<'a>,
        polled: bool,
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
            dog: None,
            polled: false,
            moved,
            after,
            name,
            seen: 0,
        }
    }

    /// Timed by `dog` where the caller lends one, instead of a timer of its own.
    pub(crate) fn lent(mut self, dog: Dog<'a>) -> Self {
        self.dog = dog;
        self
    }
}

impl<F> WhileMoving<'_, F> {
    fn timeout(name: &Name<'_>, after: Duration) -> FetchError {
        let name = match name {
            Name::Fixed(n) => n,
            Name::Phase(p) => p.name(),
        };
        FetchError::timeout(name, after)
    }
}

impl<T, F: Future<Output = Result<T, FetchError>>> Future for WhileMoving<'_, F> {
    type Output = Result<T, FetchError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(r) = this.fut.poll(cx) {
            return Poll::Ready(r);
        }
        if let Some(dog) = this.dog {
            let first = !std::mem::replace(this.polled, true);
            if dog.as_mut().timed_out(cx, this.moved, *this.after, first) {
                return Poll::Ready(Err(Self::timeout(this.name, *this.after)));
            }
            return Poll::Pending;
        }
        // The timer is set once and moved only when it fires early: a request that ends
        // within `after` registers one timer entry.
        if this.sleep.is_none() {
            let deadline = this.moved.first_deadline(this.seen, *this.after);
            this.sleep.set(Some(tokio::time::sleep_until(deadline)));
        }
        let Some(mut sleep) = this.sleep.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        while sleep.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            let deadline = this.moved.deadline_at(now, this.seen, false, *this.after);
            if deadline <= now {
                return Poll::Ready(Err(Self::timeout(this.name, *this.after)));
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

    /// `n` steps of `phase`, `every` apart, and then nothing.
    async fn steps_then_stall(phase: &Phase, n: usize, every: Duration) -> Result<(), FetchError> {
        for _ in 0..n {
            tokio::time::sleep(every).await;
            phase.step(1);
        }
        std::future::pending::<()>().await;
        Ok(())
    }

    /// Steps 0.6 s apart keep a 1 s timer from firing for 5 s; once they stop, the request
    /// ends as a timeout named for its step, no sooner than 1 s and no later than 2 s on.
    #[tokio::test(start_paused = true)]
    async fn counted_steps_keep_a_request_alive_and_their_end_times_it_out() {
        let after = Duration::from_secs(1);
        let phase = Phase::new(&["first", "second"]);
        let t0 = Instant::now();
        let steps = steps_then_stall(&phase, 8, Duration::from_millis(600));
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

    /// Quick requests, then one that steps and stalls: under a lent timer, set by the first
    /// request and never reset by the others, the stalled one ends as its own timer would
    /// end it, no sooner than `after` and no later than twice that after its last step.
    #[tokio::test(start_paused = true)]
    async fn a_lent_timer_ends_a_stalled_request_as_its_own_would() {
        let after = Duration::from_secs(1);
        let mut dog = std::pin::pin!(Watchdog::new());
        for _ in 0..5 {
            let phase = Phase::new(&["first", "second"]);
            let quick = async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                phase.step(1);
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, FetchError>(())
            };
            let moved = Moved::Steps {
                phase: &phase,
                start: Instant::now(),
            };
            WhileMoving::new(quick, moved, after, Name::Phase(&phase))
                .lent(Some(dog.as_mut()))
                .await
                .unwrap();
        }
        let phase = Phase::new(&["first", "second"]);
        let t0 = Instant::now();
        let stalls = steps_then_stall(&phase, 3, Duration::from_millis(700));
        let moved = Moved::Steps {
            phase: &phase,
            start: t0,
        };
        let e = WhileMoving::new(stalls, moved, after, Name::Phase(&phase))
            .lent(Some(dog.as_mut()))
            .await
            .unwrap_err();
        let waited = t0.elapsed().saturating_sub(Duration::from_millis(2100));
        assert!(waited >= after && waited <= 2 * after, "{waited:?}");
        assert!(e.message.starts_with("second: "), "{}", e.message);
    }

    /// A lent timer set by an earlier request fires before a later one is due: it is moved
    /// to the later one's deadline, and a connection where nothing moves ends that request
    /// exactly `after` from its start, as its own timer would.
    #[tokio::test(start_paused = true)]
    async fn a_lent_timer_never_ends_a_request_before_its_own_deadline() {
        let a = Activity::default();
        let after = Duration::from_secs(1);
        let mut dog = std::pin::pin!(Watchdog::new());
        let quick = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, FetchError>(())
        };
        let moved = Moved::Bytes {
            activity: &a,
            start: Instant::now(),
        };
        WhileMoving::new(quick, moved, after, Name::Fixed("quick"))
            .lent(Some(dog.as_mut()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let t0 = Instant::now();
        let never = std::future::pending::<Result<(), FetchError>>();
        let moved = Moved::Bytes {
            activity: &a,
            start: t0,
        };
        let e = WhileMoving::new(never, moved, after, Name::Fixed("waiting"))
            .lent(Some(dog.as_mut()))
            .await
            .unwrap_err();
        assert_eq!(t0.elapsed(), after);
        assert!(e.message.starts_with("waiting: "), "{}", e.message);
    }

    /// A request whose task has spent tokio's budget by the time its lent timer is first
    /// polled still times out: the timer's entry is made whatever the budget.
    #[tokio::test(start_paused = true)]
    async fn a_lent_timer_first_polled_out_of_budget_still_times_out() {
        let after = Duration::from_secs(1);
        let mut dog = std::pin::pin!(Watchdog::new());
        let t0 = Instant::now();
        let spent = async {
            while tokio::task::coop::has_budget_remaining() {
                tokio::task::coop::consume_budget().await;
            }
            std::future::pending::<()>().await;
            Ok::<_, FetchError>(())
        };
        let timed = WhileMoving::new(spent, Moved::Started(t0), after, Name::Fixed("spent"))
            .lent(Some(dog.as_mut()));
        let e = tokio::time::timeout(10 * after, timed)
            .await
            .expect("the lent timer ends the request")
            .unwrap_err();
        assert_eq!(t0.elapsed(), after);
        assert!(e.message.starts_with("spent: "), "{}", e.message);
    }
}
