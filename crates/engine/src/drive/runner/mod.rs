//! Drives a workload over a transport and feeds the recorder: one run at a time, the
//! connections kept warm between runs with `--reuse`.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::observe::Observer;
use futures_util::StreamExt;
use http::Uri;
use qbench_core::recorder::ConnId;
use qbench_core::report::ccstate::StateMachine;
use qbench_core::report::telemetry::Timeline;
use qbench_core::spec::load::Load;
use qbench_core::stats::saturation::ClientLoad;
use qbench_core::wire::MAX_TELEMETRY_BYTES;
use qbench_core::{HandshakeInfo, HistogramExport, LatencyHistogram, Recorder, RunReport};
use tokio::task::JoinSet;

use crate::drive::app::{App, AppPlan, AppRun};
use crate::drive::fetch::lock;
use crate::drive::hold::{open_loop, show_time, ticker, OnInterval, OpenLoop};
use crate::drive::requests::Requests;
use crate::drive::until::{Stop, Until};
use crate::drive::verify::DigestBook;
use crate::drive::workers::Workers;
use crate::measure::clock::Clock;
use crate::transport::reopen::{Reopening, Reopens};
use crate::transport::{get_body, Conn, Transport};

pub struct Plan {
    pub requests: Arc<Requests>,
    pub connections: usize,
    /// Concurrent requests per connection; `None` = all at once.
    pub streams: Option<usize>,
    pub reuse: bool,
    /// Where to fetch each connection's sender telemetry after the run.
    pub telemetry_uri: Option<Uri>,
    /// Hold a load for a time (cycling through `requests`) instead of fetching them once.
    pub load: Option<Load>,
    /// `--shard`: an open loop's schedule is this shard's part of the whole's.
    pub shard: Option<qbench_core::spec::shard::Shard>,
    /// `--log-requests`.
    pub log: Option<Arc<crate::drive::reqlog::RequestLog>>,
    pub interval: Option<Duration>,
    pub on_interval: Option<OnInterval>,
    /// A video session or a page instead of `requests`.
    pub app: Option<AppPlan>,
}

type Open = Vec<(Arc<dyn Conn>, HandshakeInfo)>;

/// Told of each connection, with its index, as soon as it is up.
type Up<'a> = dyn FnMut(usize, &Arc<dyn Conn>, &mut JoinSet<()>) + 'a;

/// Handshakes in flight at once. Thousands at once overflow the server's accept queue (TCP)
/// or UDP receive buffer (QUIC), and the dropped packets then wait a retransmission timeout
/// each; more connections are opened as earlier handshakes complete.
pub const CONNECTING: usize = 256;

/// One configuration's transport and request plan, run again and again.
pub struct Runner {
    transport: Arc<dyn Transport>,
    plan: Plan,
    clock: Clock,
    /// Connections kept open between runs with `--reuse`.
    warm: Option<Open>,
    stop: Arc<Stop>,
}

/// Why the runs after `run` are skipped: it could establish no connection at all.
pub fn abort_reason(run: &RunReport) -> Option<String> {
    run.connections
        .iter()
        .all(|c| c.error.is_some())
        .then(|| "no connection could be established".to_string())
}

impl Runner {
    pub fn new(transport: Box<dyn Transport>, plan: Plan, clock: Clock) -> Self {
        Self {
            transport: Arc::from(transport),
            plan,
            clock,
            warm: None,
            stop: Arc::default(),
        }
    }

    /// Stops a held load early (a stopping signal): no request starts after it, and the run
    /// ends once those in flight are done.
    pub fn stopper(&self) -> Arc<Stop> {
        self.stop.clone()
    }

    pub fn log_requests(&mut self, log: Arc<crate::drive::reqlog::RequestLog>) {
        self.plan.log = Some(log);
    }

    pub fn on_interval(&mut self, on: OnInterval) {
        self.plan.on_interval = Some(on);
    }

    /// Objects per run.
    pub fn objects(&self) -> u64 {
        self.plan.requests.len()
    }

    /// One run: connects (unless warm connections are kept), fetches every object (each
    /// connection starting as soon as it is up) or holds the load, then fetches the servers'
    /// telemetry.
    pub async fn run(&mut self, index: u32, progress: &Observer) -> RunReport {
        let clock = self.clock;
        let threads = crate::measure::cpu::client_threads();
        let wall = std::time::Instant::now();
        let runtime_lag = Arc::new(Mutex::new(LatencyHistogram::new()));
        let mut side_tasks = JoinSet::new();
        side_tasks.spawn(probe(runtime_lag.clone()));
        // The run's one wall-clock reading, beside its monotonic start: shards' runs are laid
        // on one time line by it.
        let wall_start = std::time::SystemTime::now();
        let run_start = clock.now();
        let rec = Arc::new(Mutex::new(Recorder::new(index, self.objects(), run_start)));
        let log = self
            .plan
            .log
            .clone()
            .map(|log| crate::drive::reqlog::LogTo {
                log,
                run: index,
                run_start,
            });
        let in_flight = Arc::new(AtomicU64::new(0));
        let load = self.plan.load.clone();
        if let Some(l) = &load {
            // Until every connection is up, whatever completes is the warm-up's.
            lock(&rec).hold(Duration::MAX, l.window(), l.rate);
        }
        if let Some(every) = self.plan.interval {
            let on = self.plan.on_interval.clone();
            let (rec, in_flight) = (rec.clone(), in_flight.clone());
            side_tasks.spawn(ticker(rec, clock, clock.now(), every, in_flight, on));
        }
        let until = load.as_ref().map(|_| Until::new(self.stop.clone(), clock));
        let open_loop_rate = load.as_ref().and_then(|l| l.rate);
        let mut workers = Workers {
            requests: self.plan.requests.clone(),
            rec: rec.clone(),
            book: Arc::new(DigestBook::default()),
            progress: progress.clone(),
            in_flight: in_flight.clone(),
            clock,
            streams: self.plan.streams,
            k: self.plan.connections as u64,
            until: until.clone(),
            log: log.clone(),
        };
        let mut tasks = JoinSet::new();
        let (conns, ids) = match self.warm.take() {
            Some(warm) => {
                workers.k = warm.len() as u64;
                let mut ids = Vec::new();
                for (ci, (c, info)) in warm.iter().enumerate() {
                    ids.push(lock(&rec).connection_reused(info.clone()));
                    if open_loop_rate.is_none() && self.plan.app.is_none() {
                        workers.spawn(ci as u64, c, &mut tasks);
                    }
                }
                (warm, ids)
            }
            None if matches!(self.plan.app.as_ref().map(|a| &a.app), Some(App::Page(_))) => {
                (Vec::new(), Vec::new())
            }
            None => {
                let app = self.plan.app.is_some();
                let mut up = |ci: usize, c: &Arc<dyn Conn>, tasks: &mut JoinSet<()>| {
                    if open_loop_rate.is_none() && !app {
                        workers.spawn(ci as u64, c, tasks);
                    }
                };
                self.connect_all(&rec, &mut tasks, &mut up).await
            }
        };
        let (mut video, mut page) = (None, None);
        // Whether the connections are fit to be kept for the next run (`--reuse`).
        let mut keep = true;
        let (mut conns, mut ids) = (conns, ids);
        if let Some(app) = &self.plan.app {
            let s = AppRun {
                rec: &rec,
                book: &workers.book,
                clock,
                start: run_start,
                base: &app.base,
                verify: app.verify,
                progress,
                log: log.as_ref(),
            };
            match &app.app {
                App::Video(v) => {
                    if let Some((c, _)) = conns.first() {
                        let (report, requested, abandoned) =
                            crate::drive::video::play(c.as_ref(), v.clone(), s).await;
                        lock(&rec).set_requested(requested);
                        keep &= !abandoned;
                        video = Some(report);
                    }
                }
                App::Page(p) => {
                    lock(&rec).set_requested(p.profile.objects.len() as u64);
                    let (opened, opened_ids, report) =
                        crate::drive::page::load(p, self.transport.as_ref(), app.h1, s).await;
                    (conns, ids) = (opened, opened_ids);
                    page = Some(report);
                }
            }
        }
        // Every connection is up (or failed): a held load's clock starts now.
        if let (Some(l), Some(until)) = (&load, &until) {
            let start = clock.now();
            lock(&rec).measure_from(start + l.warmup);
            until.set_end(start + l.duration);
            side_tasks.spawn(show_time(progress.clone(), clock, start));
            if let Some(rate) = open_loop_rate {
                let o = OpenLoop {
                    conns: conns.iter().map(|(c, _)| c.clone()).collect(),
                    requests: self.plan.requests.clone(),
                    rec: rec.clone(),
                    book: workers.book.clone(),
                    in_flight: in_flight.clone(),
                    start,
                    until: until.clone(),
                    seed: u64::from(index),
                    shard: self.plan.shard,
                    log: log.clone(),
                };
                tasks.spawn(open_loop(o, l.clone(), rate));
            }
        }
        let book = workers.book.clone();
        drop(workers);
        while tasks.join_next().await.is_some() {}
        side_tasks.shutdown().await;
        if let Some(l) = &self.plan.log {
            if let Err(e) = l.flush() {
                crate::output::lost::record("--log-requests", e);
            }
        }
        if self.plan.interval.is_some() {
            let last = lock(&rec).interval(clock.now(), 0);
            if let Some(on) = &self.plan.on_interval {
                on(&last);
            }
        }
        for ((c, _), id) in conns.iter().zip(ids) {
            let id = record_reopens(&rec, id, c.reopens()).await;
            let facts = c.streams();
            let mut r = lock(&rec);
            r.streams(id, facts.peer_limit, facts.peak);
            r.quic(id, facts.quic);
        }
        let mut report = Arc::try_unwrap(rec)
            .map_err(|_| ())
            .expect("all tasks finished")
            .into_inner()
            .expect("recorder lock")
            .finish(clock.now());
        report.started_unix_us = Some(qbench_core::spec::start::unix_us(wall_start));
        report.video = video;
        report.page = page;
        let loads = crate::measure::cpu::thread_loads(
            &threads,
            &crate::measure::cpu::client_threads(),
            wall.elapsed(),
        );
        let start_lag = report.load.as_ref().and_then(|l| l.lag.as_ref());
        report.client = Some(ClientLoad::judge(
            loads,
            HistogramExport::from(&*runtime_lag.lock().expect("probe lock")),
            start_lag.and_then(|h| h.summary.p99_us),
        ));
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
        if self.plan.reuse && keep && !conns.is_empty() && report.complete {
            self.warm = Some(conns);
        } else {
            for (c, _) in &conns {
                c.close();
            }
        }
        report
    }

    /// Closes what is still open and lets the transport say goodbye.
    pub async fn finish(&mut self) {
        for (c, _) in self.warm.take().unwrap_or_default() {
            c.close();
        }
        self.transport.finish().await;
    }

    /// Connects `--connections` times, at most `CONNECTING` handshakes at once, and hands
    /// each connection to `up` (with its index) as soon as it is up.
    async fn connect_all(
        &self,
        rec: &Arc<Mutex<Recorder>>,
        tasks: &mut JoinSet<()>,
        up: &mut Up<'_>,
    ) -> (Open, Vec<ConnId>) {
        let clock = self.clock;
        // Each handshake is timed from its own start, when a place among the connecting frees.
        let mut attempts = futures_util::stream::iter(0..self.plan.connections)
            .map(|ci| {
                let id = lock(rec).connection_started(clock.now());
                async move { (ci, id, self.transport.connect().await) }
            })
            .buffer_unordered(CONNECTING);
        let mut done = Vec::new();
        while let Some((ci, id, result)) = attempts.next().await {
            match result {
                Ok(mut c) => {
                    // Requests the server's close leaves unprocessed go again on a new one.
                    c.conn = Arc::new(Reopening::new(self.transport.clone(), clock, c.conn));
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
                    up(ci, &c.conn, tasks);
                    done.push((id, c.conn, c.info));
                }
                Err(e) => lock(rec).connection_failed(id, e.kind, &e.message),
            }
        }
        done.sort_by_key(|(id, _, _)| *id);
        let ids = done.iter().map(|(id, _, _)| *id).collect();
        (done.into_iter().map(|(_, c, i)| (c, i)).collect(), ids)
    }
}

/// Records the connections opened in place of connection `id` during the run, each with
/// what the one before it saw of streams; returns the id of the one open now.
async fn record_reopens(rec: &Mutex<Recorder>, mut id: ConnId, reopens: Reopens) -> ConnId {
    lock(rec).retried(reopens.retried);
    for r in reopens.opened {
        match r.outcome {
            Ok(new) => {
                // Settled by now: the connection has carried requests since.
                let info = match new.zero_rtt {
                    Some(accepted) => accepted.await,
                    None => new.info,
                };
                let mut rec = lock(rec);
                rec.streams(id, new.previous.peer_limit, new.previous.peak);
                rec.quic(id, new.previous.quic);
                id = rec.connection_reopened(r.started);
                rec.handshake_done(id, new.done, info);
            }
            Err(e) => {
                let mut rec = lock(rec);
                let failed = rec.connection_reopened(r.started);
                rec.connection_failed(failed, e.kind, &e.message);
            }
        }
    }
    id
}

/// How late the client's runtime runs a 10 ms timer: its scheduling lag.
async fn probe(lag: Arc<Mutex<LatencyHistogram>>) {
    let every = Duration::from_millis(10);
    loop {
        let due = tokio::time::Instant::now() + every;
        tokio::time::sleep_until(due).await;
        let late = tokio::time::Instant::now().saturating_duration_since(due);
        lag.lock().expect("probe lock").record(late);
    }
}

async fn fetch_telemetry<'a>(
    conns: impl Iterator<Item = &'a dyn Conn>,
    uri: &Uri,
) -> Vec<Timeline> {
    let mut out = Vec::new();
    // The query holds the telemetry token: never printed.
    let hide = |text: String| match uri.query() {
        Some(q) => text.replace(q, "token=<redacted>"),
        None => text,
    };
    let shown = hide(uri.to_string());
    // One line for however many connections failed alike (a page may have thousands).
    let (mut asked, mut failed, mut first) = (0, 0, None);
    for c in conns {
        asked += 1;
        let why = match get_body(c, uri, MAX_TELEMETRY_BYTES).await {
            Ok(body) => match serde_json::from_slice::<Timeline>(&body) {
                Ok(t) => {
                    out.push(t);
                    continue;
                }
                Err(e) => format!("not a timeline: {e}"),
            },
            Err(e) => hide(e.message),
        };
        failed += 1;
        first.get_or_insert(why);
    }
    if let Some(why) = first {
        crate::observe::warn(&format!(
            "warning: no telemetry from {shown} on {failed} of {asked} connection(s): {why}"
        ));
    }
    out
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod app_tests;

#[cfg(test)]
mod reopen_tests;
