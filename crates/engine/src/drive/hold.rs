//! Holding a load: the open loop's dispatcher, the interval ticker, and the stop a run
//! honours (the duration's end, SIGINT, SIGTERM or SIGHUP) by starting no more requests and
//! letting those in flight finish.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::observe::{Observer, Observing};
use qbench_core::spec::load::{Load, Schedule};
use qbench_core::Recorder;
use tokio::task::JoinSet;

use crate::drive::lanes::Lanes;
use crate::drive::lock;
use crate::drive::pacer::{Due, Paced, Pacer, Pacing, Route};
use crate::drive::requests::Requests;
use crate::drive::until::Until;
use crate::measure::clock::Clock;
use crate::transport::fetch;
use crate::transport::pinned::Pinned;
use crate::transport::verify::DigestBook;
use crate::transport::{Conn, ObjectReq};

/// What the open loop needs from the run.
pub(crate) struct OpenLoop {
    pub conns: Vec<Arc<dyn Conn>>,
    pub requests: Arc<Requests>,
    pub rec: Arc<Mutex<Recorder>>,
    pub book: Arc<DigestBook>,
    pub lanes: Arc<Lanes>,
    pub start: Duration,
    pub until: Until,
    pub seed: u64,
    pub shard: Option<qbench_core::spec::shard::Shard>,
    pub log: Option<crate::drive::reqlog::LogTo>,
    /// Connection `ci` runs on `pinned.handle(ci)`: its requests are handed out there.
    pub pinned: Option<Arc<Pinned>>,
}

/// Starts request `j` of the schedule at its due time on connection `j mod k`, never
/// waiting for a response: a late start is recorded with its lag, and a request due while
/// `max_inflight` are in flight is dropped, never delayed. With pinned connections each
/// thread hands out its own connections' requests.
pub(crate) async fn open_loop(o: OpenLoop, load: Load, rate: f64) {
    if o.conns.is_empty() {
        return;
    }
    let route = Route {
        conns: o.conns.len() as u64,
        lanes: o.pinned.as_ref().map_or(1, |p| p.threads()),
    };
    let o = Arc::new(o);
    let mut lanes = JoinSet::new();
    for lane in 0..route.busy_lanes() {
        let pacing = o.pacing(&load, rate, route, lane);
        let dispatch = dispatch(o.clone(), load.max_inflight, pacing);
        match &o.pinned {
            Some(p) => lanes.spawn_on(dispatch, p.handle(lane)),
            None => lanes.spawn(dispatch),
        };
    }
    while lanes.join_next().await.is_some() {}
}

/// One lane's requests, started as they come due.
async fn dispatch(o: Arc<OpenLoop>, max_inflight: u32, pacing: Pacing) {
    let mut full = Full::new(pacing.warm_end);
    let mut pacer = match Pacer::new(pacing, o.until.clone()) {
        Ok(p) => p,
        Err(e) => {
            lock(&o.rec).error(
                qbench_core::ErrorKind::Io,
                &format!("starting the open loop's pacing timer: {e}"),
            );
            return;
        }
    };
    let len = o.requests.len().max(1);
    let mut tasks = JoinSet::new();
    while let Some(paced) = pacer.next().await {
        if o.until.stop.is_set() {
            break;
        }
        let (j, at) = match paced {
            Paced::Due(Due { j, at }) => (j, at),
            Paced::Skipped { from, n } => {
                lock(&o.rec).dropped_late(from, n);
                continue;
            }
        };
        while tasks.try_join_next().is_some() {}
        if o.lanes.in_flight() >= u64::from(max_inflight) {
            full.drop(at, &o.rec);
            continue;
        }
        full.count(&o.rec);
        let Some(req) = o.requests.get(o.nth(j) % len) else {
            break;
        };
        o.start(j, at, req, &mut tasks);
    }
    full.count(&o.rec);
    while tasks.join_next().await.is_some() {}
}

/// Requests dropped in a row while `--max-inflight` were in flight, counted together: past
/// capacity a lane drops millions a second, and a lock of the recorder each would take the
/// CPU its requests need. Counted when a request starts, at `MAX_RUN` of them, at the
/// warm-up's end and at the lane's: an interval may get those its last moments dropped.
struct Full {
    warm_end: Duration,
    run: Option<(Duration, u64)>,
}

impl Full {
    const MAX_RUN: u64 = 4096;

    fn new(warm_end: Duration) -> Self {
        Self {
            warm_end,
            run: None,
        }
    }

    fn drop(&mut self, at: Duration, rec: &Mutex<Recorder>) {
        if let Some((from, n)) = self.run {
            if n < Self::MAX_RUN && (from < self.warm_end) == (at < self.warm_end) {
                self.run = Some((from, n + 1));
                return;
            }
            self.count(rec);
        }
        self.run = Some((at, 1));
    }

    fn count(&mut self, rec: &Mutex<Recorder>) {
        if let Some((from, n)) = self.run.take() {
            lock(rec).dropped_n(from, n);
        }
    }
}

impl OpenLoop {
    /// What lane `lane` paces. A shard's constant schedule starts at its place in the
    /// whole's (`rate` is its share), and its Poisson draws are its own; every lane draws
    /// the same schedule and takes its own connections' requests from it.
    fn pacing(&self, load: &Load, rate: f64, route: Route, lane: usize) -> Pacing {
        let (seed, phase) = match self.shard {
            Some(s) => (s.seed(self.seed as u32), s.phase(rate * f64::from(s.count))),
            None => (self.seed, Duration::ZERO),
        };
        Pacing {
            schedule: Schedule::new(rate, load.arrivals, seed),
            start: self.start + phase,
            warm_end: self.start.saturating_add(load.warmup),
            route,
            lane,
        }
    }

    /// Which of the requests the schedule's `j`th is: a shard's are the whole's in turn.
    fn nth(&self, j: u64) -> u64 {
        self.shard.map_or(j, |s| s.item(j))
    }

    /// Starts `req`, the schedule's `j`th, due at `at`, on connection `j mod k`. The task
    /// holds the loop, one reference count, not one for each part it uses.
    fn start(self: &Arc<Self>, j: u64, at: Duration, req: ObjectReq, tasks: &mut JoinSet<()>) {
        self.lanes.started();
        let o = self.clone();
        tasks.spawn(async move {
            let ci = (j % o.conns.len() as u64) as usize;
            let clock = o.until.clock;
            let mut outcome = fetch(o.conns[ci].as_ref(), &clock, &req, &o.book).await;
            outcome.intended = Some(at);
            o.lanes.ended();
            if let Some(l) = &o.log {
                l.line(ci as u64, &req.uri, &outcome);
            }
            o.lanes.record(outcome, &o.rec);
        });
    }
}

/// Ends an interval every `every` from `start` and hands it to `to` as run `run`'s; the
/// last, partial interval is the caller's to end once the run is over.
pub(crate) async fn ticker(
    (rec, lanes): (Arc<Mutex<Recorder>>, Arc<Lanes>),
    clock: Clock,
    (start, every): (Duration, Duration),
    until: Option<Until>,
    (run, to): (u32, Observing),
) {
    let mut at = start;
    loop {
        at += every;
        tokio::time::sleep_until(clock.at(at)).await;
        if until.as_ref().is_some_and(|u| near_end(at, u.end(), every)) {
            continue;
        }
        lanes.drain(&rec);
        let r = lock(&rec).interval(clock.now(), lanes.in_flight());
        to.interval(run, &r);
    }
}

/// Whether a tick at `at` falls within a tenth of an interval of a held load's `end`: the run
/// ends there, or once the requests in flight are done, so such a tick would leave a sliver
/// of an interval after it (`3.0-3.0 s`); the last interval takes it in instead, at most a
/// tenth longer than the others (plus the in-flight requests' drain).
fn near_end(at: Duration, end: Duration, every: Duration) -> bool {
    let margin = every / 10;
    end != Duration::MAX && at + margin > end && at < end.saturating_add(margin)
}

/// In duration mode the bar counts milliseconds held, adding this run's to those before it
/// (earlier runs, or the other side of a comparison).
pub(crate) async fn show_time(bar: Observing, clock: Clock, start: Duration) {
    let mut shown = 0;
    loop {
        let held = clock.now().saturating_sub(start).as_millis() as u64;
        bar.advanced(held.saturating_sub(shown));
        shown = shown.max(held);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::{near_end, Full};
    use qbench_core::Recorder;
    use std::sync::Mutex;
    use std::time::Duration;

    /// 10,000 drops in a row from 0.5 s, across the warm-up's end at 1 s: counted in runs
    /// of at most 4,096, none across the warm-up's end, and each drop once.
    #[test]
    fn drops_in_a_row_are_counted_together_and_apart_at_the_warmups_end() {
        let ms = Duration::from_millis;
        let rec = Mutex::new(Recorder::new(0, 0, Duration::ZERO));
        rec.lock()
            .unwrap()
            .hold(ms(1000), Duration::from_secs(2), Some(10_000.0));
        let mut full = Full::new(ms(1000));
        for k in 0..10_000u64 {
            full.drop(ms(500) + Duration::from_micros(100 * k), &rec);
        }
        full.count(&rec);
        let r = rec.into_inner().unwrap().finish(Duration::from_secs(3));
        let load = r.load.unwrap();
        // 0.5 s to 1 s at 10,000/s: 5,000 of the warm-up's, 5,000 measured.
        assert_eq!((load.warmup_requests, load.dropped), (5_000, 5_000));
        assert_eq!(load.dropped_late, 0);
        let intervals: u64 = r.intervals.iter().map(|i| i.dropped).sum();
        assert_eq!(intervals, 0, "no interval was ended");
    }

    #[test]
    fn a_tick_within_a_tenth_of_an_interval_of_the_end_is_skipped() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // A 3 s load that began 6 ms into the run: the tick at 3 s would leave 6 ms after it.
        assert!(near_end(s(3), ms(3006), s(1)));
        assert!(near_end(ms(3050), ms(3006), s(1)));
        assert!(!near_end(s(2), ms(3006), s(1)));
        assert!(!near_end(s(4), ms(3006), s(1)));
        assert!(!near_end(ms(2800), s(3), s(1)));
        // Before the load's end is known.
        assert!(!near_end(s(3), Duration::MAX, s(1)));
    }
}
