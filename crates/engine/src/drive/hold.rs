//! Holding a load: the open loop's dispatcher, the interval ticker, and the stop a run
//! honours (the duration's end, SIGINT, SIGTERM or SIGHUP) by starting no more requests and
//! letting those in flight finish.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::observe::Observer;
use qbench_core::report::load::IntervalRecord;
use qbench_core::spec::load::{Load, Schedule, MAX_LAG};
use qbench_core::Recorder;
use tokio::task::JoinSet;

use crate::drive::fetch::{fetch_one, lock};
use crate::drive::pacer::{pace, Due, Paced};
use crate::drive::requests::Requests;
use crate::drive::until::Until;
use crate::drive::verify::DigestBook;
use crate::measure::clock::Clock;
use crate::transport::Conn;

/// Called with each interval as it ends (printing, `--json-stream`).
pub type OnInterval = Arc<dyn Fn(&IntervalRecord) + Send + Sync>;

/// What the open loop needs from the run.
pub struct OpenLoop {
    pub conns: Vec<Arc<dyn Conn>>,
    pub requests: Arc<Requests>,
    pub rec: Arc<Mutex<Recorder>>,
    pub book: Arc<DigestBook>,
    pub in_flight: Arc<AtomicU64>,
    pub start: Duration,
    pub until: Until,
    pub seed: u64,
    pub shard: Option<qbench_core::spec::shard::Shard>,
    pub log: Option<crate::drive::reqlog::LogTo>,
}

/// Starts request `j` of the schedule at its due time on connection `j mod k`, never
/// waiting for a response: a late start is recorded with its lag, and a request due while
/// `max_inflight` are in flight is dropped, never delayed.
pub async fn open_loop(o: OpenLoop, load: Load, rate: f64) {
    let OpenLoop {
        conns,
        requests,
        rec,
        book,
        in_flight,
        start,
        until,
        seed,
        shard,
        log,
    } = o;
    let clock = until.clock;
    if conns.is_empty() {
        return;
    }
    let (k, len) = (conns.len() as u64, requests.len().max(1));
    // A shard's constant schedule starts at its place in the whole's (`rate` is its share),
    // and its Poisson draws are its own; its requests are the whole's in turn.
    let (seed, phase) = match shard {
        Some(s) => (s.seed(seed as u32), s.phase(rate * f64::from(s.count))),
        None => (seed, Duration::ZERO),
    };
    let nth = |j: u64| shard.map_or(j, |s| s.item(j));
    let schedule = Schedule::new(rate, load.arrivals, seed);
    let stop = until.stop.clone();
    let warm_end = start.saturating_add(load.warmup);
    let mut due = match pace(schedule, start + phase, warm_end, until.clone()) {
        Ok(rx) => rx,
        Err(e) => {
            lock(&rec).error(
                qbench_core::ErrorKind::Io,
                &format!("starting the open loop's pacer thread: {e}"),
            );
            return;
        }
    };
    let mut tasks = JoinSet::new();
    while let Some(paced) = due.recv().await {
        // Requests queued for the runtime when the stop came are not started either.
        if stop.is_set() {
            break;
        }
        let (j, at) = match paced {
            Paced::Due(Due { j, at }) => (j, at),
            Paced::Skipped { from, n } => {
                lock(&rec).dropped_late(from, n);
                continue;
            }
        };
        // Queued while the runtime fell behind: started now it would be late beyond the
        // bound, or after the window.
        let now = clock.now();
        if now >= until.end() || now.saturating_sub(at) > MAX_LAG {
            lock(&rec).dropped_late(at, 1);
            continue;
        }
        while tasks.try_join_next().is_some() {}
        if in_flight.load(Ordering::Relaxed) >= u64::from(load.max_inflight) {
            lock(&rec).dropped(at);
            continue;
        }
        let Some(req) = requests.get(nth(j) % len) else {
            break;
        };
        in_flight.fetch_add(1, Ordering::Relaxed);
        let ci = j % k;
        let (conn, rec, book, in_flight, log) = (
            conns[ci as usize].clone(),
            rec.clone(),
            book.clone(),
            in_flight.clone(),
            log.clone(),
        );
        tasks.spawn(async move {
            let mut outcome = fetch_one(conn.as_ref(), &clock, &req, &book).await;
            outcome.intended = Some(at);
            in_flight.fetch_sub(1, Ordering::Relaxed);
            if let Some(l) = &log {
                l.line(ci, &req.uri, &outcome);
            }
            lock(&rec).object(outcome);
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Ends an interval every `every` from `start` and hands it to `on`; the last, partial
/// interval is the caller's to end once the run is over.
pub async fn ticker(
    rec: Arc<Mutex<Recorder>>,
    clock: Clock,
    start: Duration,
    every: Duration,
    in_flight: Arc<AtomicU64>,
    on: Option<OnInterval>,
) {
    let mut at = start;
    loop {
        at += every;
        tokio::time::sleep_until(clock.at(at)).await;
        let r = lock(&rec).interval(clock.now(), in_flight.load(Ordering::Relaxed));
        if let Some(on) = &on {
            on(&r);
        }
    }
}

/// In duration mode the bar counts milliseconds held, adding this run's to those before it
/// (earlier runs, or the other side of a comparison).
pub async fn show_time(bar: Observer, clock: Clock, start: Duration) {
    let mut shown = 0;
    loop {
        let held = clock.now().saturating_sub(start).as_millis() as u64;
        bar.advanced(held.saturating_sub(shown));
        shown = shown.max(held);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
