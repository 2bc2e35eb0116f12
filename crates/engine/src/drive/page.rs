//! A page replayed as a browser loads it: each object is requested once the object that
//! revealed it has arrived, over connections per origin (as many as six for HTTP/1.1, one
//! at a time each; one multiplexed connection for HTTP/2 and HTTP/3), opened as they are
//! needed. Every origin's objects come from the one qbench server, at their recorded sizes.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use qbench_core::page::PageProfile;
use qbench_core::recorder::ConnId;
use qbench_core::report::page::{LevelRecord, PageReport, PageSpec};
use qbench_core::{HandshakeInfo, ObjectOutcome};

use crate::drive::app::AppRun;
use crate::drive::lock;
use crate::observe::Observer;
use crate::transport::fetch;
use crate::transport::{Conn, Connected, FetchError, Transport};

/// Connections a browser opens per origin over HTTP/1.1 (Chrome's and Firefox's limit).
pub(crate) const H1_PER_ORIGIN: usize = 6;

/// Connections a page holds at once (open or opening) over all its origins: Chrome's
/// per-pool limit. At it, a connection another origin has no use for is closed to make room,
/// as Chrome closes idle sockets; a page of thousands of origins does not open thousands of
/// connections at once.
pub(crate) const MAX_OPEN: usize = 256;

/// Connection attempts per origin before its waiting objects are given up on.
pub(crate) const CONNECT_ATTEMPTS: u32 = 3;

/// A page load's run, and how it connects.
struct Load<'a> {
    transport: &'a dyn Transport,
    /// HTTP/1.1: up to six connections per origin, one request at a time on each.
    h1: bool,
    run: AppRun<'a>,
}

enum Event {
    Connected(usize, ConnId, Result<Connected, FetchError>),
    /// A 0-RTT connection's handshake completed.
    Handshake(ConnId, HandshakeInfo),
    Fetched {
        origin: usize,
        conn: usize,
        object: usize,
        outcome: ObjectOutcome,
    },
}

type Pending<'a> = Pin<Box<dyn Future<Output = Event> + Send + 'a>>;

/// The connections still open at the end, by id: the run reads their stream figures and
/// telemetry. One closed to make room has its figures recorded when it closes.
type Opened = BTreeMap<ConnId, (Arc<dyn Conn>, HandshakeInfo)>;

/// An open connection of an origin.
struct Slot {
    conn: Arc<dyn Conn>,
    /// Its requests in flight.
    busy: usize,
    id: ConnId,
}

#[derive(Default)]
struct Origin {
    /// Each connection and its requests in flight; `None` once retired (by a failed request,
    /// or closed to make room for another origin's).
    conns: Vec<Option<Slot>>,
    connecting: usize,
    /// Wants a connection the page's `MAX_OPEN` does not allow yet.
    waiting: bool,
    /// Connection attempts that failed: after `CONNECT_ATTEMPTS`, the origin's objects that
    /// wait for a connection stay unsent.
    failed: u32,
    queue: VecDeque<usize>,
    opened: u64,
}

/// What `load` returns.
type Loaded = (Vec<(Arc<dyn Conn>, HandshakeInfo)>, Vec<ConnId>, PageReport);

/// What a page load keeps track of as it goes.
struct Loading {
    origins: Vec<Origin>,
    /// Origins to serve, in turn, before the next event is awaited.
    waiting: VecDeque<usize>,
    opened: Opened,
    /// By object: when it was requested, and when it arrived and whether whole.
    sent: Vec<Option<Duration>>,
    done: Vec<Option<(Duration, bool)>>,
    /// By object: the objects it reveals, requested once it has arrived.
    children: Vec<Vec<usize>>,
    /// 0-RTT connections whose handshake has not completed.
    confirming: usize,
}

/// Loads the page once; returns the connections it opened (with their ids, for the run's
/// stream figures and telemetry) and the page's report.
pub(crate) async fn load(
    page: &PageSpec,
    transport: &dyn Transport,
    h1: bool,
    run: AppRun<'_>,
) -> (Vec<(Arc<dyn Conn>, HandshakeInfo)>, Vec<ConnId>, PageReport) {
    let s = Load { transport, h1, run };
    let profile = &page.profile;
    let limit = if s.h1 { H1_PER_ORIGIN } else { 1 };
    let mut l = Loading::new(profile);
    let mut pending: FuturesUnordered<Pending<'_>> = FuturesUnordered::new();
    let s = &s;
    loop {
        // After a stop nothing more is sent and what is in flight ends; a connection still
        // opening (or confirming 0-RTT) is abandoned, as a hung handshake would hold the
        // report back until its timeout.
        let stopped = s.run.stop.is_set();
        if !stopped {
            make_room(s, profile, limit, &mut l, &mut pending);
        } else if pending.len() == l.opening() {
            break;
        }
        let next = if stopped {
            pending.next().await
        } else {
            tokio::select! {
                e = pending.next() => e,
                () = s.run.stop.wait() => continue,
            }
        };
        let Some(event) = next else {
            break;
        };
        let touched = l.touched(&event, profile);
        l.on_event(s, profile, event, &mut pending);
        l.wake(touched);
    }
    l.finish(page, s.run.start)
}

impl Loading {
    /// Nothing sent yet; every origin waits to be served, with the objects nothing reveals
    /// queued.
    fn new(profile: &PageProfile) -> Self {
        let n = profile.objects.len();
        let mut children = vec![Vec::new(); n];
        let mut origins: Vec<Origin> = profile.origins.iter().map(|_| Origin::default()).collect();
        for (i, o) in profile.objects.iter().enumerate() {
            match o.parent {
                Some(p) => children[p].push(i),
                None => origins[o.origin].queue.push_back(i),
            }
        }
        let waiting = (0..origins.len()).collect();
        for o in &mut origins {
            o.waiting = true;
        }
        Self {
            origins,
            waiting,
            opened: Opened::new(),
            sent: vec![None; n],
            done: vec![None; n],
            children,
            confirming: 0,
        }
    }

    /// Connections opening or confirming 0-RTT: what is pending that no request waits on.
    fn opening(&self) -> usize {
        self.confirming + self.origins.iter().map(|o| o.connecting).sum::<usize>()
    }

    /// The origins `event` may let send or open more: its own, and those of the objects a
    /// fetched one reveals.
    fn touched(&self, event: &Event, profile: &PageProfile) -> Vec<usize> {
        match event {
            Event::Connected(oi, _, _) => vec![*oi],
            Event::Handshake(..) => Vec::new(),
            Event::Fetched { origin, object, .. } => {
                let mut t = vec![*origin];
                t.extend(
                    self.children[*object]
                        .iter()
                        .map(|&c| profile.objects[c].origin),
                );
                t
            }
        }
    }

    fn on_event<'b>(
        &mut self,
        s: &'b Load<'b>,
        profile: &PageProfile,
        event: Event,
        pending: &mut FuturesUnordered<Pending<'b>>,
    ) {
        match event {
            Event::Connected(oi, id, Ok(c)) => self.connected(s, oi, id, c, pending),
            Event::Connected(oi, id, Err(e)) => {
                let o = &mut self.origins[oi];
                o.connecting -= 1;
                o.failed += 1;
                // Tried again up to CONNECT_ATTEMPTS; then what waits stays unsent, and the
                // run counts it as not started.
                lock(s.run.rec).connection_failed(id, e.kind, &e.message);
            }
            Event::Handshake(id, info) => {
                self.confirming -= 1;
                lock(s.run.rec).handshake_done(id, s.run.clock.now(), info)
            }
            Event::Fetched {
                origin,
                conn,
                object,
                outcome,
            } => self.fetched(s, profile, origin, conn, object, outcome),
        }
    }

    /// Origin `oi`'s new connection `id` joins its others; a 0-RTT one's handshake is
    /// recorded once it completes.
    fn connected<'b>(
        &mut self,
        s: &'b Load<'b>,
        oi: usize,
        id: ConnId,
        c: Connected,
        pending: &mut FuturesUnordered<Pending<'b>>,
    ) {
        let o = &mut self.origins[oi];
        o.connecting -= 1;
        match c.zero_rtt {
            Some(accepted) => {
                self.confirming += 1;
                pending.push(Box::pin(
                    async move { Event::Handshake(id, accepted.await) },
                ))
            }
            None => lock(s.run.rec).handshake_done(id, c.done, c.info.clone()),
        }
        o.conns.push(Some(Slot {
            conn: c.conn.clone(),
            busy: 0,
            id,
        }));
        self.opened.insert(id, (c.conn, c.info));
    }

    /// Records the object that arrived (or failed) on connection `conn` of `origin`, frees
    /// that connection, and queues what the object reveals.
    fn fetched(
        &mut self,
        s: &Load<'_>,
        profile: &PageProfile,
        origin: usize,
        conn: usize,
        object: usize,
        outcome: ObjectOutcome,
    ) {
        let ok = outcome.error.is_none();
        self.done[object] = Some((outcome.done, ok));
        s.run.progress.advanced(1);
        lock(s.run.rec).object(outcome);
        // A request that failed may have taken its connection down (HTTP/1.1 always
        // does): the next request gets another one.
        let slot = &mut self.origins[origin].conns[conn];
        match slot {
            Some(slot) if ok => slot.busy -= 1,
            _ => *slot = None,
        }
        if ok {
            for &c in &self.children[object] {
                self.origins[profile.objects[c].origin].queue.push_back(c);
            }
        }
    }

    /// Puts the `touched` origins in line to be served, each once.
    fn wake(&mut self, touched: Vec<usize>) {
        for oi in touched {
            if !self.origins[oi].waiting {
                self.origins[oi].waiting = true;
                self.waiting.push_back(oi);
            }
        }
    }

    /// The page's report, and the connections still open with their ids.
    fn finish(self, page: &PageSpec, start: Duration) -> Loaded {
        let profile = &page.profile;
        let report = PageReport {
            name: page.name.clone(),
            objects: profile.objects.len() as u64,
            bytes: profile.total_bytes(),
            origins: profile.origins.len() as u64,
            connections: self.origins.iter().map(|o| o.opened).collect(),
            levels: levels(page, &self.sent, &self.done, start),
        };
        let ids = self.opened.keys().copied().collect();
        (self.opened.into_values().collect(), ids, report)
    }
}

/// Connections open or opening, over every origin.
fn open(origins: &[Origin]) -> usize {
    origins
        .iter()
        .map(|o| o.conns.iter().flatten().count() + o.connecting)
        .sum()
}

/// Serves the origins that wait, in turn: each sends what it can and opens what it needs
/// within `MAX_OPEN`, closing connections idle at origins with nothing queued to make room.
/// Those still short of a connection wait for the next event.
fn make_room<'b>(
    s: &'b Load<'b>,
    profile: &'b PageProfile,
    limit: usize,
    l: &mut Loading,
    pending: &mut FuturesUnordered<Pending<'b>>,
) {
    let Loading {
        origins,
        waiting,
        opened,
        sent,
        ..
    } = l;
    let mut room = MAX_OPEN.saturating_sub(open(origins));
    // Idle connections of origins with nothing queued: nothing in this pass queues more.
    let mut spare: Vec<(usize, usize)> = origins
        .iter()
        .enumerate()
        .filter(|(_, o)| o.queue.is_empty())
        .flat_map(|(j, o)| {
            o.conns
                .iter()
                .enumerate()
                .filter_map(move |(k, c)| c.as_ref().is_some_and(|c| c.busy == 0).then_some((j, k)))
        })
        .collect();
    let mut blocked = VecDeque::new();
    while let Some(oi) = waiting.pop_front() {
        loop {
            let o = &mut origins[oi];
            if !start_what_can(s, profile, limit, oi, o, sent, pending, &mut room) {
                o.waiting = false;
                break;
            }
            match spare.pop() {
                Some((j, k)) => {
                    if let Some(Slot { conn, id, .. }) = origins[j].conns[k].take() {
                        // Its figures are final; dropping the last handle closes it.
                        let facts = conn.streams();
                        let mut rec = lock(s.run.rec);
                        rec.streams(id, facts.peer_limit, facts.peak);
                        rec.quic(id, facts.quic);
                        conn.close();
                        opened.remove(&id);
                    }
                    room += 1;
                }
                None => {
                    blocked.push_back(oi);
                    break;
                }
            }
        }
    }
    *waiting = blocked;
}

/// Sends what origin `oi` has queued on its idle connections, and opens connections for
/// what finds every one busy, using up `room`. Returns whether it wants one `room` lacked.
#[allow(clippy::too_many_arguments)]
fn start_what_can<'b>(
    s: &'b Load<'b>,
    profile: &'b PageProfile,
    limit: usize,
    oi: usize,
    o: &mut Origin,
    sent: &mut [Option<Duration>],
    pending: &mut FuturesUnordered<Pending<'b>>,
    room: &mut usize,
) -> bool {
    while let Some(&object) = o.queue.front() {
        let idle = o
            .conns
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| !s.h1 || c.busy == 0));
        let Some(ci) = idle else {
            break;
        };
        o.queue.pop_front();
        let Some(Slot { conn, busy, .. }) = &mut o.conns[ci] else {
            break;
        };
        *busy += 1;
        let conn = conn.clone();
        let req = s.run.request(profile.objects[object].size);
        sent[object] = Some(s.run.clock.now());
        // From the first request on, a stop keeps the run so far; before, it drops it.
        s.run.stop.requests_began();
        pending.push(Box::pin(async move {
            let outcome = fetch(conn.as_ref(), &s.run.clock, &req, s.run.book).await;
            if let Some(l) = s.run.log {
                l.line(oi as u64, &req.uri, &outcome);
            }
            Event::Fetched {
                origin: oi,
                conn: ci,
                object,
                outcome,
            }
        }));
    }
    // A browser opens another connection for a request that finds every one busy.
    let alive = o.conns.iter().flatten().count();
    let wants = |o: &Origin| {
        o.queue.len() > o.connecting && alive + o.connecting < limit && o.failed < CONNECT_ATTEMPTS
    };
    while wants(o) {
        if *room == 0 {
            return true;
        }
        *room -= 1;
        o.connecting += 1;
        o.opened += 1;
        let id = lock(s.run.rec).connection_started(s.run.clock.now());
        pending.push(Box::pin(async move {
            Event::Connected(oi, id, s.transport.connect().await)
        }));
    }
    false
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Per level: its objects and bytes, its first request and, once all of it arrived, its
/// last byte.
fn levels(
    page: &PageSpec,
    sent: &[Option<Duration>],
    done: &[Option<(Duration, bool)>],
    start: Duration,
) -> Vec<LevelRecord> {
    let count = page.profile.levels() as usize;
    let mut out: Vec<LevelRecord> = (0..count)
        .map(|l| LevelRecord {
            level: l as u32,
            objects: 0,
            bytes: 0,
            first_request_us: None,
            done_us: None,
            failed: 0,
        })
        .collect();
    let mut complete = vec![true; count];
    for (i, o) in page.profile.objects.iter().enumerate() {
        let l = &mut out[o.level as usize];
        l.objects += 1;
        l.bytes = l.bytes.saturating_add(o.size);
        if let Some(t) = sent[i] {
            let t = us(t.saturating_sub(start));
            l.first_request_us = Some(l.first_request_us.map_or(t, |f| f.min(t)));
        }
        match done[i] {
            Some((t, true)) => {
                let t = us(t.saturating_sub(start));
                l.done_us = Some(l.done_us.map_or(t, |d| d.max(t)));
            }
            Some((_, false)) => {
                l.failed += 1;
                complete[o.level as usize] = false;
            }
            None => complete[o.level as usize] = false,
        }
    }
    for (l, whole) in out.iter_mut().zip(complete) {
        if !whole {
            l.done_us = None;
        }
    }
    out
}
