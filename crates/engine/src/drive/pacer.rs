//! When each open-loop request is due, paced on the thread that starts it. Each lane (a
//! pinned client thread, or the one runtime) walks the whole schedule and takes the requests
//! of its own connections, sleeping on its own timer (`pace_timer`) until each is due.
//! A client past its capacity falls behind the schedule: requests it could not start within
//! `MAX_LAG` of their time, or by the window's end, are skipped and counted, so the run ends
//! at its duration instead of when the backlog is worked off.

use std::collections::VecDeque;
use std::time::Duration;

use qbench_core::spec::load::{Schedule, MAX_LAG};

use crate::drive::pace_timer::PaceTimer;
use crate::drive::until::Until;

/// Request `j` of the schedule is due at `at` on the run clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due {
    pub j: u64,
    pub at: Duration,
}

/// What the pacer hands its lane: a request to start, or requests it skipped because the
/// client was more than `MAX_LAG` behind them or the window had ended (the first due at
/// `from`; all on one side of the warm-up's end).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Paced {
    Due(Due),
    Skipped { from: Duration, n: u64 },
}

/// Which lane request `j` goes to: request `j` runs on connection `j mod conns`, and
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

    /// The lanes that run a connection: a lane without one gets no request.
    pub(crate) fn busy_lanes(&self) -> usize {
        (self.conns.max(1)).min(self.lanes.max(1) as u64) as usize
    }

    /// How many of the `n` requests from `from` on (indices end at `u64::MAX`) go to `lane`.
    pub(crate) fn count(&self, lane: usize, from: u64, n: u64) -> u64 {
        self.before(lane, from.saturating_add(n)) - self.before(lane, from)
    }

    /// How many of the requests before `j` go to `lane`: of each `conns` in a row, one per
    /// connection, and connection `ci` is `lane`'s when `ci mod lanes` is `lane`.
    fn before(&self, lane: usize, j: u64) -> u64 {
        let conns = self.conns.max(1);
        let lanes = self.lanes.max(1) as u64;
        let lane = lane as u64;
        if lane >= lanes {
            return 0;
        }
        let of_first = |k: u64| {
            if k > lane {
                (k - lane - 1) / lanes + 1
            } else {
                0
            }
        };
        (j / conns) * of_first(conns) + of_first(j % conns)
    }
}

/// What a lane paces: the schedule laid on the run clock from `start` (requests due before
/// `warm_end` are the warm-up's), and its own share of it.
pub(crate) struct Pacing {
    pub schedule: Schedule,
    pub start: Duration,
    pub warm_end: Duration,
    pub route: Route,
    pub lane: usize,
}

/// One lane's pacer: its requests, each handed over once due, on the lane's own thread.
pub(crate) struct Pacer {
    plan: Plan,
    until: Until,
    timer: PaceTimer,
    /// When this lane last woke from a sleep, on the run clock.
    woke: Option<Duration>,
    skipped: VecDeque<Paced>,
    over: bool,
}

impl Pacer {
    /// Builds the lane's timer on the calling thread's runtime: call it on the lane.
    pub(crate) fn new(p: Pacing, until: Until) -> std::io::Result<Self> {
        Ok(Self {
            timer: PaceTimer::new(&until.clock)?,
            plan: Plan {
                schedule: p.schedule,
                start: p.start,
                warm_end: p.warm_end,
                next: 0,
                share: (p.route, p.lane),
            },
            until,
            woke: None,
            skipped: VecDeque::new(),
            over: false,
        })
    }

    /// The lane's next request once it is due, or the requests skipped before it; `None`
    /// at the window's end or a stop. Each one spends the task's tokio budget, as any tokio
    /// resource does: past capacity every request is due at once, and the lane must still
    /// yield to its requests and connections.
    pub(crate) async fn next(&mut self) -> Option<Paced> {
        tokio::task::coop::consume_budget().await;
        loop {
            if let Some(p) = self.skipped.pop_front() {
                return Some(p);
            }
            if self.over {
                return None;
            }
            let due = self.plan.next()?;
            let end = self.until.end();
            if due.at >= end {
                return None;
            }
            let clock = self.until.clock;
            if self.fell_behind(due, clock.now(), end) {
                continue;
            }
            if clock.now() < due.at {
                let wake = match self.woke {
                    Some(w) => due.at.max(w.saturating_add(self.timer.quantum())),
                    None => due.at,
                };
                let timer = &mut self.timer;
                let sleep = async move {
                    // The timer is the kernel's; should it ever fail, tokio's (1 ms ticks)
                    // still ends the wait.
                    if timer.sleep_until(&clock, wake).await.is_err() {
                        tokio::time::sleep_until(clock.at(wake)).await;
                    }
                };
                tokio::select! {
                    () = sleep => {}
                    () = self.until.stop.wait() => return None,
                }
                let now = clock.now();
                self.woke = Some(now);
                if self.fell_behind(due, now, end) {
                    continue;
                }
            }
            return Some(Paced::Due(due));
        }
    }

    /// Behind by more than the bound, or past the window: skips to where the client can
    /// still start requests on time, counting what it skipped.
    fn fell_behind(&mut self, due: Due, now: Duration, end: Duration) -> bool {
        let behind = now.saturating_sub(due.at) > MAX_LAG;
        let over = now >= end;
        if !behind && !over {
            return false;
        }
        let to = if over { end } else { (now - MAX_LAG).min(end) };
        self.skipped.extend(self.plan.skip(due, to));
        self.over = over;
        true
    }
}

/// The schedule laid on the run clock, the index of its next request, and the lane whose
/// share it yields (a run on one lane: `Route { conns: 1, lanes: 1 }` and lane 0).
struct Plan {
    schedule: Schedule,
    start: Duration,
    warm_end: Duration,
    next: u64,
    share: (Route, usize),
}

impl Plan {
    fn next(&mut self) -> Option<Due> {
        loop {
            let at = self.start.checked_add(self.schedule.next()?)?;
            let j = self.next;
            self.next += 1;
            let (route, lane) = self.share;
            if route.lane(j) == lane {
                return Some(Due { j, at });
            }
        }
    }

    /// Skips `first` and every request due before `to`, split at the warm-up's end; counts
    /// only the share's.
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
        let from = self.next;
        let skipped = self
            .schedule
            .skip_to(to.saturating_sub(self.start).as_secs_f64());
        self.next = self.next.saturating_add(skipped);
        let (route, lane) = self.share;
        route.count(lane, from, skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use qbench_core::spec::load::Arrivals;

    fn plan(start_ms: u64, warm_ms: u64) -> Plan {
        Plan {
            schedule: Schedule::new(1000.0, Arrivals::Constant, 0),
            start: Duration::from_millis(start_ms),
            warm_end: Duration::from_millis(warm_ms),
            next: 0,
            share: (Route { conns: 1, lanes: 1 }, 0),
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

    fn shared(rate: f64, warm_ms: u64, route: Route, lane: usize) -> Plan {
        Plan {
            schedule: Schedule::new(rate, Arrivals::Constant, 0),
            start: Duration::ZERO,
            warm_end: Duration::from_millis(warm_ms),
            next: 0,
            share: (route, lane),
        }
    }

    /// 7 connections on 3 lanes: the lanes' shares of the first 1,000 requests are
    /// disjoint, each request in the share of its connection's lane, and together they are
    /// the whole schedule, at the whole's due times.
    #[test]
    fn the_lanes_shares_are_the_whole_schedule_once() {
        let route = Route { conns: 7, lanes: 3 };
        let mut all: Vec<(u64, Duration)> = Vec::new();
        for lane in 0..route.busy_lanes() {
            let mut p = shared(1000.0, 0, route, lane);
            let mine: Vec<Due> = std::iter::from_fn(|| p.next())
                .take_while(|d| d.j < 1000)
                .collect();
            assert!(mine.iter().all(|d| route.lane(d.j) == lane));
            all.extend(mine.iter().map(|d| (d.j, d.at)));
        }
        all.sort();
        let whole: Vec<(u64, Duration)> =
            (0..1000).map(|j| (j, Duration::from_millis(j))).collect();
        assert_eq!(all, whole);
        // More lanes than connections: only the lanes with a connection pace.
        assert_eq!(Route { conns: 2, lanes: 8 }.busy_lanes(), 2);
        assert_eq!(Route { conns: 0, lanes: 0 }.busy_lanes(), 1);
    }

    /// Each lane, skipping the same stretch across the warm-up's end, counts only its own
    /// requests; the lanes' counts add up to the whole's.
    #[test]
    fn each_lane_counts_its_own_skipped_requests() {
        let route = Route { conns: 5, lanes: 2 };
        let (mut warm, mut measured) = (0, 0);
        for lane in 0..2 {
            let mut p = shared(1000.0, 50, route, lane);
            let first = p.next().unwrap();
            let v = p.skip(first, Duration::from_millis(100));
            let c = counts(&v);
            assert_eq!(c.len(), 2, "{c:?}");
            warm += c[0].1 + first.j;
            measured += c[1].1;
            // The next request is the lane's first due at or after 100 ms.
            let next = p.next().unwrap();
            assert_eq!(route.lane(next.j), lane);
            assert!(next.j >= 100 && next.j < 105, "{next:?}");
        }
        // Lane 1's first request is j = 1, so the stretch from 0 ms held 50 warm-up
        // requests (0..50) and 50 measured ones (50..100).
        assert_eq!((warm, measured), (51, 50));
    }

    /// On the real clock a lane's requests are handed over at or after their due times,
    /// only its own, each once, in order (400 requests at 8,000/s; no figure of time).
    #[tokio::test]
    async fn a_lane_hands_over_its_requests_when_due() {
        let clock = crate::measure::clock::Clock::start();
        let until = Until::new(Default::default(), clock);
        let route = Route { conns: 4, lanes: 2 };
        let start = clock.now() + Duration::from_millis(2);
        until.set_end(start + Duration::from_millis(50));
        let pacing = Pacing {
            schedule: Schedule::new(8000.0, Arrivals::Constant, 0),
            start,
            warm_end: start,
            route,
            lane: 1,
        };
        let mut pacer = Pacer::new(pacing, until).unwrap();
        let mut seen = Vec::new();
        let mut skipped = 0;
        while let Some(p) = pacer.next().await {
            match p {
                Paced::Due(d) => {
                    assert!(clock.now() >= d.at, "{d:?} handed over early");
                    seen.push(d.j);
                }
                Paced::Skipped { n, .. } => skipped += n,
            }
        }
        assert!(seen.iter().all(|j| route.lane(*j) == 1));
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        // 400 requests due in the window, half of them on lane 1.
        assert_eq!(seen.len() as u64 + skipped, 200);
    }

    /// Past capacity every request is due at once: a lane taking 10,000 of them in a row
    /// still lets the other tasks of its one-thread runtime run meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_lane_with_every_request_due_yields_to_its_runtime() {
        let clock = crate::measure::clock::Clock::start();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let until = Until::new(Default::default(), clock);
        until.set_end(Duration::from_secs(60));
        let pacing = Pacing {
            schedule: Schedule::new(1e9, Arrivals::Constant, 0),
            start: Duration::ZERO,
            warm_end: Duration::ZERO,
            route: Route { conns: 1, lanes: 1 },
            lane: 0,
        };
        let mut pacer = Pacer::new(pacing, until).unwrap();
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let other = ran.clone();
        let side = tokio::spawn(async move {
            loop {
                other.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        for _ in 0..10_000 {
            assert!(matches!(pacer.next().await, Some(Paced::Due(_))));
        }
        let turns = ran.load(std::sync::atomic::Ordering::Relaxed);
        side.abort();
        assert!(turns > 0, "the other task never ran");
    }

    proptest! {
        /// A lane's count of `n` requests from `from` is the brute-force count.
        #[test]
        fn a_lanes_count_is_the_brute_force_count(
            conns in 0u64..40,
            lanes in 0usize..9,
            from in prop_oneof![0u64..1000, (u64::MAX - 1000)..=u64::MAX],
            n in 0u64..400,
            lane in 0usize..9,
        ) {
            let r = Route { conns, lanes };
            let brute = (from..from.saturating_add(n))
                .filter(|j| r.lane(*j) == lane)
                .count() as u64;
            prop_assert_eq!(r.count(lane, from, n), brute);
        }
    }
}
