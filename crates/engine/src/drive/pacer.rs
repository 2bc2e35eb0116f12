//! When each open-loop request is due. tokio's timer ticks in milliseconds and rounds a
//! deadline up to its next tick, which would start every request up to 1 ms late; on the
//! real clock a thread of its own sleeps to each due time instead (with 1 us timer slack)
//! and hands the request to the runtime. On tokio's paused test clock, a task does it.
//! A client past its capacity falls behind the schedule: requests it could not start within
//! `MAX_LAG` of their time, or by the window's end, are skipped and counted, so the run ends
//! at its duration instead of when the backlog is worked off.
//! With pinned client threads the pacer hands each request straight to the thread its
//! connection runs on (one queue per thread), so no other runtime relays it.

use std::time::{Duration, Instant};

use qbench_core::spec::load::{Schedule, MAX_LAG};
use tokio::sync::mpsc;

use crate::drive::until::Until;

/// Request `j` of the schedule is due at `at` on the run clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due {
    pub j: u64,
    pub at: Duration,
}

/// What the pacer hands the runtime: a request to start, or requests it skipped because the
/// client was more than `MAX_LAG` behind them or the window had ended (the first due at
/// `from`; all on one side of the warm-up's end).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Paced {
    Due(Due),
    Skipped { from: Duration, n: u64 },
}

/// Due requests queued between the pacer and the runtime: if the runtime falls behind, the
/// pacer waits, and the requests still carry their due times, so the lag is counted.
const QUEUE: usize = 4096;
/// The pacer looks at the stop this often while it sleeps.
const STOP_CHECK: Duration = Duration::from_millis(20);
/// The pacer wakes at most once per quantum and then hands over every request due by then:
/// a start is at most this late from pacing, and at 100,000 requests per second the thread
/// still wakes only 10,000 times (a wake-up costs a few microseconds of CPU, more in a VM).
pub(crate) const QUANTUM: Duration = Duration::from_micros(100);

/// Which queue request `j` goes to: request `j` runs on connection `j mod conns`, and
/// connection `ci` on lane `ci mod lanes`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub conns: u64,
    pub lanes: usize,
}

impl Route {
    pub(crate) fn lane(&self, j: u64) -> usize {
        let ci = j % self.conns.max(1);
        (ci % self.lanes.max(1) as u64) as usize
    }
}

/// The pacer's end of the lanes' queues.
struct Lanes {
    route: Route,
    tx: Vec<mpsc::Sender<Paced>>,
}

impl Lanes {
    /// Skipped requests go to the lane of the first of them: any lane records them.
    fn of(&self, p: &Paced, j: u64) -> &mpsc::Sender<Paced> {
        let lane = match p {
            Paced::Due(d) => self.route.lane(d.j),
            Paced::Skipped { .. } => self.route.lane(j),
        };
        &self.tx[lane]
    }
}

/// Starts pacing `schedule` from `start` (an offset on the run clock) until `until`; requests
/// due before `warm_end` are the warm-up's. One queue per lane of `route`.
pub(crate) fn pace(
    schedule: Schedule,
    start: Duration,
    warm_end: Duration,
    until: Until,
    route: Route,
) -> std::io::Result<Vec<mpsc::Receiver<Paced>>> {
    let (tx, rx): (Vec<_>, Vec<_>) = (0..route.lanes.max(1))
        .map(|_| mpsc::channel(QUEUE))
        .unzip();
    let tx = Lanes { route, tx };
    let plan = Plan {
        schedule,
        start,
        warm_end,
        next: 0,
    };
    if until.clock.is_real() {
        let epoch = until.clock.at(Duration::ZERO).into_std();
        std::thread::Builder::new()
            .name("qbench-pacer".into())
            .spawn(move || {
                pace_thread(plan, until, epoch, tx);
                crate::measure::cpu::thread_ending();
            })?;
    } else {
        tokio::spawn(pace_task(plan, until, tx));
    }
    Ok(rx)
}

/// The schedule laid on the run clock, and the index of its next request.
struct Plan {
    schedule: Schedule,
    start: Duration,
    warm_end: Duration,
    next: u64,
}

impl Plan {
    fn next(&mut self) -> Option<Due> {
        let at = self.start.checked_add(self.schedule.next()?)?;
        let j = self.next;
        self.next += 1;
        Some(Due { j, at })
    }

    /// Skips `first` and every request due before `to`, split at the warm-up's end.
    fn skip(&mut self, first: Due, to: Duration) -> Vec<Paced> {
        if first.at < self.warm_end && to > self.warm_end {
            let warm = 1 + self.skip_to(self.warm_end);
            let measured = self.skip_to(to);
            let mut out = vec![Paced::Skipped {
                from: first.at,
                n: warm,
            }];
            if measured > 0 {
                out.push(Paced::Skipped {
                    from: self.warm_end,
                    n: measured,
                });
            }
            return out;
        }
        vec![Paced::Skipped {
            from: first.at,
            n: 1 + self.skip_to(to),
        }]
    }

    fn skip_to(&mut self, to: Duration) -> u64 {
        let skipped = self
            .schedule
            .skip_to(to.saturating_sub(self.start).as_secs_f64());
        self.next = self.next.saturating_add(skipped);
        skipped
    }
}

fn pace_thread(mut plan: Plan, until: Until, epoch: Instant, tx: Lanes) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut woke = Instant::now();
    while let Some(due) = plan.next() {
        let end = until.end();
        if due.at >= end {
            return;
        }
        let (at, now) = (epoch + due.at, Instant::now());
        // Behind by more than the bound, or past the window: skip to where the client can
        // still start requests on time, counting what it skipped.
        let behind = now.saturating_duration_since(at) > MAX_LAG;
        let over = now >= epoch + end;
        if behind || over {
            let to = if over {
                end
            } else {
                (now - epoch - MAX_LAG).min(end)
            };
            for p in plan.skip(due, to) {
                if tx.of(&p, due.j).blocking_send(p).is_err() {
                    return;
                }
            }
            if over {
                return;
            }
            continue;
        }
        if now < at {
            let wake = at.max(woke + QUANTUM);
            loop {
                if until.stop.is_set() {
                    return;
                }
                let now = Instant::now();
                if now >= wake {
                    break;
                }
                std::thread::sleep((wake - now).min(STOP_CHECK));
            }
            woke = Instant::now();
        }
        let p = Paced::Due(due);
        if tx.of(&p, due.j).blocking_send(p).is_err() {
            return;
        }
    }
}

async fn pace_task(mut plan: Plan, until: Until, tx: Lanes) {
    while let Some(due) = plan.next() {
        if due.at >= until.end() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(until.clock.at(due.at)) => {}
            () = until.stop.wait() => return,
        }
        let p = Paced::Due(due);
        if tx.of(&p, due.j).send(p).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::spec::load::Arrivals;

    fn plan(start_ms: u64, warm_ms: u64) -> Plan {
        Plan {
            schedule: Schedule::new(1000.0, Arrivals::Constant, 0),
            start: Duration::from_millis(start_ms),
            warm_end: Duration::from_millis(warm_ms),
            next: 0,
        }
    }

    fn counts(v: &[Paced]) -> Vec<(u64, u64)> {
        v.iter()
            .map(|p| match p {
                Paced::Skipped { from, n } => (from.as_millis() as u64, *n),
                Paced::Due(d) => panic!("skipping yields no due request: {d:?}"),
            })
            .collect()
    }

    /// With 5 connections on 2 lanes, request j goes to the lane of connection j mod 5:
    /// connections 0, 2, 4 on lane 0 and 1, 3 on lane 1, and one lane takes every request.
    #[test]
    fn requests_go_to_the_lane_their_connection_runs_on() {
        let r = Route { conns: 5, lanes: 2 };
        let lanes: Vec<usize> = (0..10).map(|j| r.lane(j)).collect();
        assert_eq!(lanes, vec![0, 1, 0, 1, 0, 0, 1, 0, 1, 0]);
        let one = Route { conns: 3, lanes: 1 };
        assert!((0..100).all(|j| one.lane(j) == 0));
        // No connection or no lane is one lane, never a division by zero.
        let none = Route { conns: 0, lanes: 0 };
        assert_eq!(none.lane(u64::MAX), 0);
    }

    /// At 1000/s from 10 ms, with the warm-up ending at 50 ms: skipping from the first
    /// request to 100 ms counts 40 warm-up requests and 50 measured ones, and the index goes
    /// on with the first request left, due at 100 ms.
    #[test]
    fn skipped_requests_are_counted_apart_at_the_warmups_end() {
        let mut p = plan(10, 50);
        let first = p.next().unwrap();
        assert_eq!(first.at, Duration::from_millis(10));
        let v = p.skip(first, Duration::from_millis(100));
        assert_eq!(counts(&v), vec![(10, 40), (50, 50)]);
        let next = p.next().unwrap();
        assert_eq!((next.j, next.at), (90, Duration::from_millis(100)));
        // All after the warm-up: one count.
        let v = p.skip(next, Duration::from_millis(120));
        assert_eq!(counts(&v), vec![(100, 20)]);
        // All within the warm-up: one count.
        let mut p = plan(0, 500);
        let first = p.next().unwrap();
        assert_eq!(
            counts(&p.skip(first, Duration::from_millis(7))),
            vec![(0, 7)]
        );
    }
}
