//! Drives a workload over a transport and feeds the recorder: one run at a time, the
//! connections kept warm between runs with `--reuse`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use http::Uri;
use indicatif::ProgressBar;
use qbench_core::ccstate::StateMachine;
use qbench_core::load::Load;
use qbench_core::recorder::ConnId;
use qbench_core::telemetry::Timeline;
use qbench_core::wire::MAX_TELEMETRY_BYTES;
use qbench_core::{ErrorKind, HandshakeInfo, ObjectOutcome, Recorder, RunReport};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::hold::{open_loop, show_time, ticker, OnInterval, OpenLoop, Stop, Until};
use crate::requests::Requests;
use crate::transport::{fetch, get_body, Conn, ObjectReq, Transport};
use crate::verify::DigestBook;

pub(crate) struct Plan {
    pub(crate) requests: Arc<Requests>,
    pub(crate) connections: usize,
    /// Concurrent requests per connection; `None` = all at once.
    pub(crate) streams: Option<usize>,
    pub(crate) reuse: bool,
    /// Where to fetch each connection's sender telemetry after the run.
    pub(crate) telemetry_uri: Option<Uri>,
    /// Hold a load for a time (cycling through `requests`) instead of fetching them once.
    pub(crate) load: Option<Load>,
    pub(crate) interval: Option<Duration>,
    pub(crate) on_interval: Option<OnInterval>,
}

type Open = Vec<(Arc<dyn Conn>, HandshakeInfo)>;

/// One configuration's transport and request plan, run again and again.
pub(crate) struct Runner {
    transport: Box<dyn Transport>,
    plan: Plan,
    clock: Clock,
    /// Connections kept open between runs with `--reuse`.
    warm: Option<Open>,
    stop: Arc<Stop>,
}

fn lock(rec: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    rec.lock().expect("recorder lock")
}

/// Why the runs after `run` are skipped: it could establish no connection at all.
pub(crate) fn abort_reason(run: &RunReport) -> Option<String> {
    run.connections
        .iter()
        .all(|c| c.error.is_some())
        .then(|| "no connection could be established".to_string())
}

impl Runner {
    pub(crate) fn new(transport: Box<dyn Transport>, plan: Plan, clock: Clock) -> Self {
        Self {
            transport,
            plan,
            clock,
            warm: None,
            stop: Arc::default(),
        }
    }

    /// Stops a held load early (SIGINT): no request starts after it, and the run ends once
    /// those in flight are done.
    pub(crate) fn stopper(&self) -> Arc<Stop> {
        self.stop.clone()
    }

    pub(crate) fn on_interval(&mut self, on: OnInterval) {
        self.plan.on_interval = Some(on);
    }

    /// Objects per run.
    pub(crate) fn objects(&self) -> u64 {
        self.plan.requests.len()
    }

    /// One run: connects (unless warm connections are kept), fetches every object, then the
    /// servers' telemetry.
    pub(crate) async fn run(&mut self, index: u32, progress: &ProgressBar) -> RunReport {
        let clock = self.clock;
        let rec = Arc::new(Mutex::new(Recorder::new(
            index,
            self.objects(),
            clock.now(),
        )));
        let mut tasks = JoinSet::new();
        let (conns, ids) = match self.warm.take() {
            Some(warm) => {
                let ids = warm
                    .iter()
                    .map(|(_, info)| lock(&rec).connection_reused(info.clone()))
                    .collect();
                (warm, ids)
            }
            None => self.connect_all(&rec, &mut tasks).await,
        };
        let book = Arc::new(DigestBook::default());
        let start = clock.now();
        let in_flight = Arc::new(AtomicU64::new(0));
        lock(&rec).begin_intervals(start);
        let mut side_tasks = JoinSet::new();
        if let Some(every) = self.plan.interval {
            let on = self.plan.on_interval.clone();
            side_tasks.spawn(ticker(
                rec.clone(),
                clock,
                start,
                every,
                in_flight.clone(),
                on,
            ));
        }
        match self.plan.load.clone() {
            None => self.spawn_workers(&conns, &rec, &book, progress, &mut tasks, None, &in_flight),
            Some(load) => {
                lock(&rec).hold(start + load.warmup, load.window(), load.rate);
                let held = u64::from(index) * load.duration.as_millis() as u64;
                side_tasks.spawn(show_time(progress.clone(), clock, start, held));
                let until = Until {
                    end: start + load.duration,
                    stop: self.stop.clone(),
                    clock,
                };
                match load.rate {
                    None => self.spawn_workers(
                        &conns,
                        &rec,
                        &book,
                        progress,
                        &mut tasks,
                        Some(until),
                        &in_flight,
                    ),
                    Some(rate) => {
                        let o = OpenLoop {
                            conns: conns.iter().map(|(c, _)| c.clone()).collect(),
                            requests: self.plan.requests.clone(),
                            rec: rec.clone(),
                            book: book.clone(),
                            in_flight: in_flight.clone(),
                            start,
                            until,
                            seed: u64::from(index),
                        };
                        tasks.spawn(open_loop(o, load, rate));
                    }
                }
            }
        }
        while tasks.join_next().await.is_some() {}
        side_tasks.shutdown().await;
        if self.plan.interval.is_some() {
            let last = lock(&rec).interval(clock.now(), 0);
            if let Some(on) = &self.plan.on_interval {
                on(&last);
            }
        }
        for ((c, _), id) in conns.iter().zip(ids) {
            let facts = c.streams();
            lock(&rec).streams(id, facts.peer_limit, facts.peak);
        }
        let mut report = Arc::try_unwrap(rec)
            .map_err(|_| ())
            .expect("all tasks finished")
            .into_inner()
            .expect("recorder lock")
            .finish(clock.now());
        if self.plan.requests.hashed {
            let book = Arc::try_unwrap(book).expect("all tasks finished");
            report.digests = Some(book.into_map());
        }
        if let Some(uri) = &self.plan.telemetry_uri {
            let timelines = fetch_telemetry(conns.iter().map(|(c, _)| c.as_ref()), uri).await;
            if !timelines.is_empty() {
                let refs: Vec<&Timeline> = timelines.iter().collect();
                report.cc_states = Some(StateMachine::infer(&refs));
                report.telemetry = Some(timelines);
            }
        }
        if self.plan.reuse && !conns.is_empty() && report.complete {
            self.warm = Some(conns);
        } else {
            for (c, _) in &conns {
                c.close();
            }
        }
        report
    }

    /// Closes what is still open and lets the transport say goodbye.
    pub(crate) async fn finish(&mut self) {
        for (c, _) in self.warm.take().unwrap_or_default() {
            c.close();
        }
        self.transport.finish().await;
    }

    async fn connect_all(
        &self,
        rec: &Arc<Mutex<Recorder>>,
        tasks: &mut JoinSet<()>,
    ) -> (Open, Vec<ConnId>) {
        let clock = self.clock;
        let attempts = (0..self.plan.connections).map(|_| {
            let id = lock(rec).connection_started(clock.now());
            async move { (id, self.transport.connect().await) }
        });
        let (mut up, mut ids) = (Vec::new(), Vec::new());
        for (id, result) in join_all(attempts).await {
            match result {
                Ok(c) => {
                    match c.zero_rtt {
                        Some(accepted) => {
                            let rec = rec.clone();
                            tasks.spawn(async move {
                                let info = accepted.await;
                                lock(&rec).handshake_done(id, clock.now(), info);
                            });
                        }
                        None => lock(rec).handshake_done(id, c.done, c.info.clone()),
                    }
                    up.push((c.conn, c.info));
                    ids.push(id);
                }
                Err(e) => lock(rec).connection_failed(id, e.kind, &e.message),
            }
        }
        (up, ids)
    }

    /// Objects go round-robin over the connections; on each, a fixed pool of `--streams`
    /// workers pulls the next request: the same concurrency as one task per request behind a
    /// semaphore, without thousands of parked tasks. With `until` (a closed loop held for a
    /// time), each connection cycles through the requests until then.
    #[allow(clippy::too_many_arguments)]
    fn spawn_workers(
        &self,
        conns: &Open,
        rec: &Arc<Mutex<Recorder>>,
        book: &Arc<DigestBook>,
        progress: &ProgressBar,
        tasks: &mut JoinSet<()>,
        until: Option<Until>,
        in_flight: &Arc<AtomicU64>,
    ) {
        let k = conns.len() as u64;
        let total = self.plan.requests.len();
        for (ci, (conn, _)) in conns.iter().enumerate() {
            let ci = ci as u64;
            // This connection's objects: ci, ci + k, ci + 2k, ...
            let mine = match until {
                Some(_) => u64::MAX,
                None => total.saturating_sub(ci).div_ceil(k),
            };
            let workers = self.plan.streams.map_or(mine, |s| s as u64).min(mine);
            let next = Arc::new(AtomicU64::new(0));
            for _ in 0..workers {
                let (conn, reqs, next, rec, bar, book, until, in_flight) = (
                    conn.clone(),
                    self.plan.requests.clone(),
                    next.clone(),
                    rec.clone(),
                    progress.clone(),
                    book.clone(),
                    until.clone(),
                    in_flight.clone(),
                );
                let clock = self.clock;
                tasks.spawn(async move {
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let i = ci.wrapping_add(n.wrapping_mul(k));
                        let req = match &until {
                            None => reqs.get(i),
                            Some(u) if u.over() || total == 0 => None,
                            Some(_) => reqs.get(i % total),
                        };
                        let Some(req) = req else {
                            break;
                        };
                        in_flight.fetch_add(1, Ordering::Relaxed);
                        let outcome = fetch_one(conn.as_ref(), &clock, &req, &book).await;
                        in_flight.fetch_sub(1, Ordering::Relaxed);
                        if until.is_none() {
                            bar.inc(1);
                        }
                        lock(&rec).object(outcome);
                    }
                });
            }
        }
    }
}

/// Fetches one object; a body whose digest differs from an earlier fetch of the same URL
/// counts as a mismatch.
pub(crate) async fn fetch_one(
    conn: &dyn Conn,
    clock: &Clock,
    req: &ObjectReq,
    book: &DigestBook,
) -> ObjectOutcome {
    let mut fetched = fetch(conn, clock, req).await;
    if let Some(d) = &fetched.digest {
        if let Some(prev) = book.record(&req.uri.to_string(), d) {
            fetched.outcome.error = Some((
                ErrorKind::BodyMismatch,
                format!(
                    "{}: sha256 {d} differs from an earlier fetch's {prev}",
                    req.uri
                ),
            ));
        }
    }
    fetched.outcome
}

async fn fetch_telemetry<'a>(
    conns: impl Iterator<Item = &'a dyn Conn>,
    uri: &Uri,
) -> Vec<Timeline> {
    let mut out = Vec::new();
    for c in conns {
        match get_body(c, uri, MAX_TELEMETRY_BYTES).await {
            Ok(body) => match serde_json::from_slice::<Timeline>(&body) {
                Ok(t) => out.push(t),
                Err(e) => crate::tell!("warning: telemetry from {uri} is not a timeline: {e}"),
            },
            Err(e) => crate::tell!("warning: no telemetry from {uri}: {}", e.message),
        }
    }
    out
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
