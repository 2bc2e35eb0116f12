//! Drives a workload over a transport and feeds the recorder: one run at a time, the
//! connections kept warm between runs with `--reuse`.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::observe::{Observer, Observing};
use futures_util::StreamExt;
use http::Uri;
use qbench_core::recorder::ConnId;
use qbench_core::report::ccstate::StateMachine;
use qbench_core::report::telemetry::Timeline;
use qbench_core::spec::load::Load;
use qbench_core::wire::MAX_TELEMETRY_BYTES;
use qbench_core::{HandshakeInfo, Recorder, RunReport};
use tokio::task::JoinSet;

use crate::drive::app::{App, AppPlan, AppRun};
use crate::drive::hold::{open_loop, show_time, ticker, OpenLoop};
use crate::drive::lanes::{drain_every, Lanes};
use crate::drive::lock;
use crate::drive::reqlog::LogTo;
use crate::drive::requests::Requests;
use crate::drive::until::{Stop, Until};
use crate::drive::workers::Workers;
use crate::measure::clock::Clock;
use crate::transport::pinned::Pinned;
use crate::transport::reopen::Reopening;
use crate::transport::verify::DigestBook;
use crate::transport::{get_body, Conn, FetchError, Transport};
use qbench_core::errors::ErrorKind;

pub(crate) struct Plan {
    pub requests: Arc<Requests>,
    pub connections: usize,
    /// Concurrent requests per connection; `None` = all at once.
    pub streams: Option<usize>,
    pub reuse: bool,
    /// Where to fetch each connection's sender telemetry after the run.
    pub telemetry_uri: Option<Uri>,
    /// `--cwnd-cap`, recorded with each connection's telemetry.
    pub cwnd_cap: Option<u32>,
    /// Hold a load for a time (cycling through `requests`) instead of fetching them once.
    pub load: Option<Load>,
    /// `--shard`: an open loop's schedule is this shard's part of the whole's.
    pub shard: Option<qbench_core::spec::shard::Shard>,
    /// `--log-requests`.
    pub log: Option<Arc<crate::drive::reqlog::RequestLog>>,
    pub interval: Option<Duration>,
    /// A video session or a page instead of `requests`.
    pub app: Option<AppPlan>,
}

type Open = Vec<(Arc<dyn Conn>, HandshakeInfo)>;

/// Told of each connection, with its index, as soon as it is up.
type Up<'a> = dyn FnMut(usize, &Arc<dyn Conn>, &mut JoinSet<()>) + 'a;

/// Handshakes in flight at once. Thousands at once overflow the server's accept queue (TCP)
/// or UDP receive buffer (QUIC), and the dropped packets then wait a retransmission timeout
/// each; more connections are opened as earlier handshakes complete.
pub(crate) const CONNECTING: usize = 256;

/// One configuration's transport and request plan, run again and again.
pub(crate) struct Runner {
    transport: Arc<dyn Transport>,
    plan: Plan,
    clock: Clock,
    /// Connections kept open between runs with `--reuse`.
    warm: Option<Open>,
    stop: Arc<Stop>,
    /// With several client threads: closed- and open-loop connections, with their requests, on one
    /// single-threaded runtime each (see `pinned`).
    pinned: Option<Arc<Pinned>>,
}

/// What the steps of one run share.
struct RunState {
    index: u32,
    rec: Arc<Mutex<Recorder>>,
    lanes: Arc<Lanes>,
    /// When the run started, before connecting: its times count from here.
    start: Duration,
    log: Option<LogTo>,
    /// A held load's end, set once every connection is up.
    until: Option<Until>,
}

/// What a video session or a page leaves for the run's report.
struct Played {
    video: Option<qbench_core::video::VideoReport>,
    page: Option<qbench_core::report::page::PageReport>,
    /// Whether the connections are fit to be kept for the next run (`--reuse`): not once a
    /// segment was abandoned, its response cut off (an HTTP/1.1 connection is then gone).
    keep: bool,
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
            transport: Arc::from(transport),
            plan,
            clock,
            warm: None,
            stop: Arc::default(),
            pinned: None,
        }
    }

    /// Closed- and open-loop connections go to `pinned`'s runtimes from the next run on.
    pub(crate) fn pin(&mut self, pinned: Pinned) {
        self.pinned = Some(Arc::new(pinned));
    }

    /// The receive and send buffers the kernel granted the client's UDP sockets (h3).
    pub(crate) fn udp_buffers(&self) -> Option<(u64, u64)> {
        self.transport.udp_buffers()
    }

    /// The threads that run the connections, when they are pinned.
    pub(crate) fn pinned_threads(&self) -> Option<usize> {
        self.pinned.as_ref().map(|p| p.threads())
    }

    /// Stops a run early (a stopping signal): no request starts after it, and the run ends
    /// once those in flight are done.
    pub(crate) fn stopper(&self) -> Arc<Stop> {
        self.stop.clone()
    }

    pub(crate) fn log_requests(&mut self, log: Arc<crate::drive::reqlog::RequestLog>) {
        self.plan.log = Some(log);
    }

    /// Objects per run.
    pub(crate) fn objects(&self) -> u64 {
        self.plan.requests.len()
    }

    /// One run: connects (unless warm connections are kept), fetches every object (each
    /// connection starting as soon as it is up) or holds the load, then fetches the servers'
    /// telemetry.
    pub(crate) async fn run(&mut self, index: u32, progress: &Observing) -> RunReport {
        let mut side_tasks = JoinSet::new();
        let watch = ClientWatch::start(&mut side_tasks);
        // The run's one wall-clock reading, beside its monotonic start: shards' runs are laid
        // on one time line by it.
        let wall_start = std::time::SystemTime::now();
        let run = self.begin(index, progress, &mut side_tasks);
        self.stop.new_run();
        let mut workers = self.workers(&run);
        let mut tasks = JoinSet::new();
        let (mut conns, mut ids) = self.connect(&run.rec, &mut workers, &mut tasks).await;
        let played = self
            .play_app(&run, &workers.book, progress, &mut conns, &mut ids)
            .await;
        self.start_hold(
            &run,
            &conns,
            &workers.book,
            progress,
            &mut tasks,
            &mut side_tasks,
        );
        let book = workers.book.clone();
        // Its handles would keep the recorder and the digests from being taken whole at the end.
        drop(workers);
        while tasks.join_next().await.is_some() {}
        if let (Some(_), Some(at)) = (&self.plan.load, self.stop.stopped_at()) {
            lock(&run.rec).stopped_at(self.clock.offset_of(at));
        }
        side_tasks.shutdown().await;
        run.lanes.drain(&run.rec);
        self.wind_down(run.index, &run.rec, progress);
        record_streams(&run.rec, &conns, ids).await;
        let keep = played.keep;
        let mut report = self.report(run.rec, watch, wall_start, played, book);
        self.add_telemetry(&mut report, &conns, progress).await;
        let fit = keep && report.complete;
        self.keep_or_close(conns, fit);
        report
    }

    /// Sets up what the run's steps share, the recorder first, and ticks its intervals.
    fn begin(&self, index: u32, to: &Observing, side_tasks: &mut JoinSet<()>) -> RunState {
        let clock = self.clock;
        let start = clock.now();
        let rec = Recorder::new(index, self.objects(), start).ticking(self.plan.interval.is_some());
        let rec = Arc::new(Mutex::new(rec));
        let log = self.plan.log.clone().map(|log| LogTo {
            log,
            run: index,
            run_start: start,
            lost: to.clone(),
            warm_end: Arc::new(AtomicU64::new(match self.plan.load {
                Some(_) => u64::MAX,
                None => 0,
            })),
        });
        let threads = self.pinned.as_ref().map_or(1, |p| p.threads());
        let counted = self.plan.load.is_none().then(|| to.clone());
        let lanes = Arc::new(Lanes::new(threads, counted));
        if let Some(l) = &self.plan.load {
            // Until every connection is up, whatever completes is the warm-up's.
            lock(&rec).hold(Duration::MAX, l.window(), l.rate);
        }
        let until = self
            .plan
            .load
            .as_ref()
            .map(|_| Until::new(self.stop.clone(), clock));
        let (r, l) = (rec.clone(), lanes.clone());
        match self.plan.interval {
            Some(every) => {
                let ticks = (clock.now(), every);
                let to = (index, to.clone());
                side_tasks.spawn(ticker((r, l), clock, ticks, until.clone(), to));
            }
            None => {
                side_tasks.spawn(drain_every(l, r));
            }
        }
        RunState {
            index,
            rec,
            lanes,
            start,
            log,
            until,
        }
    }

    fn workers(&self, run: &RunState) -> Workers {
        Workers {
            requests: self.plan.requests.clone(),
            rec: run.rec.clone(),
            book: Arc::new(DigestBook::default()),
            lanes: run.lanes.clone(),
            clock: self.clock,
            streams: self.plan.streams,
            k: self.plan.connections as u64,
            until: run.until.clone(),
            stop: self.stop.clone(),
            log: run.log.clone(),
            pinned: None,
        }
    }

    /// The run's connections: those kept warm from the last run, or new ones (none up front
    /// for a page, which opens its own as it needs them). In a closed loop each connection's
    /// workers start as soon as it is up.
    async fn connect(
        &mut self,
        rec: &Arc<Mutex<Recorder>>,
        workers: &mut Workers,
        tasks: &mut JoinSet<()>,
    ) -> (Open, Vec<ConnId>) {
        let open_loop = self.plan.load.as_ref().and_then(|l| l.rate).is_some();
        let closed_loop = !open_loop && self.plan.app.is_none();
        // An app's player hands out requests from the calling runtime: its connections stay
        // there. An open loop's are handed out on each connection's own thread.
        let pin = self.pinned.clone().filter(|_| self.plan.app.is_none());
        // A run of fixed objects ends for its slots only at a stop.
        let held = workers.until.is_some();
        let slot_end =
            (workers.until.clone()).unwrap_or_else(|| Until::new(self.stop.clone(), self.clock));
        workers.pinned = pin.clone();
        match self.warm.take() {
            Some(warm) => {
                workers.k = warm.len() as u64;
                let mut ids = Vec::new();
                for (ci, (c, info)) in warm.iter().enumerate() {
                    ids.push(lock(rec).connection_reused(info.clone()));
                    serves_until(c, &slot_end, held);
                    if closed_loop {
                        workers.spawn(ci as u64, c, tasks);
                    }
                }
                (warm, ids)
            }
            None if matches!(self.plan.app.as_ref().map(|a| &a.app), Some(App::Page(_))) => {
                (Vec::new(), Vec::new())
            }
            None => {
                let mut up = |ci: usize, c: &Arc<dyn Conn>, tasks: &mut JoinSet<()>| {
                    serves_until(c, &slot_end, held);
                    if closed_loop {
                        workers.spawn(ci as u64, c, tasks);
                    }
                };
                self.connect_all(rec, tasks, &mut up, pin.as_ref()).await
            }
        }
    }

    /// Plays the run's video session or loads its page, if it has one. A page brings its own
    /// connections: they replace `conns` and `ids`.
    async fn play_app(
        &self,
        run: &RunState,
        book: &DigestBook,
        progress: &Observing,
        conns: &mut Open,
        ids: &mut Vec<ConnId>,
    ) -> Played {
        let mut played = Played {
            video: None,
            page: None,
            keep: true,
        };
        let Some(app) = &self.plan.app else {
            return played;
        };
        let s = AppRun {
            rec: &run.rec,
            book,
            clock: self.clock,
            start: run.start,
            base: &app.base,
            verify: app.verify,
            progress,
            log: run.log.as_ref(),
            stop: &self.stop,
        };
        match &app.app {
            App::Video(v) => {
                if let Some((c, _)) = conns.first() {
                    self.stop.requests_began();
                    let (report, requested, abandoned) =
                        crate::drive::video::play(c.as_ref(), v.clone(), s).await;
                    lock(&run.rec).set_requested(requested);
                    played.keep = !abandoned;
                    played.video = Some(report);
                }
            }
            App::Page(p) => {
                lock(&run.rec).set_requested(p.profile.objects.len() as u64);
                let (opened, opened_ids, report) =
                    crate::drive::page::load(p, self.transport.as_ref(), app.h1, s).await;
                (*conns, *ids) = (opened, opened_ids);
                played.page = Some(report);
            }
        }
        played
    }

    /// Starts a held load's clock: called once every connection is up (or failed), so that
    /// connecting counts toward neither the warm-up nor the duration. With `--rate`, the open
    /// loop starts too.
    fn start_hold(
        &self,
        run: &RunState,
        conns: &Open,
        book: &Arc<DigestBook>,
        progress: &Observing,
        tasks: &mut JoinSet<()>,
        side_tasks: &mut JoinSet<()>,
    ) {
        let (Some(l), Some(until)) = (&self.plan.load, &run.until) else {
            return;
        };
        if l.rate.is_some() {
            // The open loop starts requests from here on (a closed loop's workers say so).
            self.stop.requests_began();
        }
        let clock = self.clock;
        let start = clock.now();
        lock(&run.rec).measure_from(start + l.warmup);
        if let Some(log) = &run.log {
            log.warm_until(start + l.warmup);
        }
        until.set_end(start + l.duration);
        side_tasks.spawn(show_time(progress.clone(), clock, start));
        if let Some(rate) = l.rate {
            let o = OpenLoop {
                conns: conns.iter().map(|(c, _)| c.clone()).collect(),
                requests: self.plan.requests.clone(),
                rec: run.rec.clone(),
                book: book.clone(),
                lanes: run.lanes.clone(),
                start,
                until: until.clone(),
                seed: u64::from(run.index),
                shard: self.plan.shard,
                log: run.log.clone(),
                pinned: self.pinned.clone().filter(|_| self.plan.app.is_none()),
            };
            tasks.spawn(open_loop(o, l.clone(), rate));
        }
    }

    /// Once every request is done: flushes the request log and ends the last, partial
    /// interval.
    fn wind_down(&self, index: u32, rec: &Mutex<Recorder>, to: &Observing) {
        if let Some(l) = &self.plan.log {
            if let Err(e) = l.flush() {
                crate::output::lost::record(to, "--log-requests", e);
            }
        }
        if self.plan.interval.is_some() {
            let last = lock(rec).interval(self.clock.now(), 0);
            to.interval(index, &last);
        }
    }

    /// The recorder's report, with what only the run knows: when it started by the wall
    /// clock, the app's report, the client's load and the bodies' digests.
    fn report(
        &self,
        rec: Arc<Mutex<Recorder>>,
        watch: ClientWatch,
        wall_start: std::time::SystemTime,
        played: Played,
        book: Arc<DigestBook>,
    ) -> RunReport {
        let mut report = Arc::try_unwrap(rec)
            .map_err(|_| ())
            .expect("all tasks finished")
            .into_inner()
            .expect("recorder lock")
            .finish(self.clock.now());
        report.started_unix_us = Some(qbench_core::spec::start::unix_us(wall_start));
        report.video = played.video;
        report.page = played.page;
        report.client = Some(watch.judge(&report));
        if self.plan.requests.hashed {
            let book = Arc::try_unwrap(book).expect("all tasks finished");
            report.digests = Some(book.into_map());
        }
        report
    }

    /// Each connection's sender telemetry, and the congestion states inferred from it.
    async fn add_telemetry(&self, report: &mut RunReport, conns: &Open, to: &Observing) {
        let Some(uri) = &self.plan.telemetry_uri else {
            return;
        };
        let mut timelines = fetch_telemetry(conns.iter().map(|(c, _)| c.as_ref()), uri, to).await;
        if let Some(cap) = self.plan.cwnd_cap {
            timelines.iter_mut().for_each(|t| t.record_cap(cap));
        }
        if !timelines.is_empty() {
            let refs: Vec<&Timeline> = timelines.iter().collect();
            report.cc_states = Some(StateMachine::infer(&refs));
            report.telemetry = Some(timelines);
        }
    }

    /// With `--reuse`, keeps the connections for the next run if they are `fit` for it;
    /// otherwise closes them.
    fn keep_or_close(&mut self, conns: Open, fit: bool) {
        if self.plan.reuse && fit && !conns.is_empty() {
            self.warm = Some(conns);
        } else {
            for (c, _) in &conns {
                c.close();
            }
        }
    }

    /// Closes what is still open and lets the transport say goodbye.
    pub(crate) async fn finish(&mut self) {
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
        pin: Option<&Arc<Pinned>>,
    ) -> (Open, Vec<ConnId>) {
        let clock = self.clock;
        // Each handshake is timed from its own start, when a place among the connecting frees.
        let mut attempts = futures_util::stream::iter(0..self.plan.connections)
            .map(|ci| {
                let id = lock(rec).connection_started(clock.now());
                let on = pin.map(|p| p.handle(ci).clone());
                let transport = self.transport.clone();
                async move {
                    let connected = match on {
                        // Made on its runtime: its driver task and socket live there.
                        Some(h) => match h.spawn(async move { transport.connect().await }).await {
                            Ok(r) => r,
                            Err(e) => Err(FetchError::new(
                                ErrorKind::Io,
                                format!("connecting on a pinned client thread: {e}"),
                            )),
                        },
                        None => self.transport.connect().await,
                    };
                    (ci, id, connected)
                }
            })
            .buffer_unordered(CONNECTING);
        let mut done = Vec::new();
        // A stop abandons the handshakes under way: one that hangs would hold the run until
        // its timeout. Those that completed first are kept.
        loop {
            let next = tokio::select! {
                biased;
                r = attempts.next() => r,
                () = self.stop.wait() => None,
            };
            let Some((ci, id, result)) = next else {
                break;
            };
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

async fn fetch_telemetry<'a>(
    conns: impl Iterator<Item = &'a dyn Conn>,
    uri: &Uri,
    to: &Observing,
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
        to.warn(&format!(
            "warning: no telemetry from {shown} on {failed} of {asked} connection(s): {why}"
        ));
    }
    out
}

mod client_load;
use client_load::ClientWatch;
mod slots;
use slots::{record_streams, serves_until};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod app_tests;

#[cfg(test)]
mod reopen_tests;
