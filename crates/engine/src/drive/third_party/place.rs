//! What the processes reported (or, for clients that report no timings, what the server saw)
//! recorded as connections and objects, as qbench's own clients record theirs.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use qbench_core::errors::ErrorKind;
use qbench_core::report::third_party::{Anchor, AnchorEvent, TimingSource};
use qbench_core::{HandshakeInfo, ObjectOutcome, Recorder};
use qbench_server::truth::Seen;

use super::process::Ended;
use super::{Ctx, Invocation};
use crate::measure::clock::Clock;

/// A connection a process reported.
#[derive(Debug, Clone)]
pub(super) struct ConnOut {
    pub started: Duration,
    pub handshake: Option<Duration>,
    pub error: Option<(ErrorKind, String)>,
    pub local_port: Option<u16>,
    pub alpn: Option<String>,
    /// When the client sent the packet whose arrival the server records as its accept: TCP's
    /// handshake done (curl's time_connect: its ACK goes out), or QUIC's first Initial.
    pub connected: Option<Duration>,
    /// How long that packet took to reach the server, by the client's own account (QUIC: half
    /// its first round trip); `None` leaves it to the server (TCP: half its handshake's RTT).
    pub one_way: Option<Duration>,
    /// QUIC: the original destination CID, as the server's log names it.
    pub odcid: Option<String>,
}

/// An object a process reported.
#[derive(Debug, Clone)]
pub(super) struct ObjOut {
    /// Which of the run's objects, when the program says.
    pub index: Option<usize>,
    pub sent: Duration,
    pub headers: Option<Duration>,
    pub done: Duration,
    pub bytes: u64,
    pub status: Option<u16>,
    pub error: Option<(ErrorKind, String)>,
    pub verified: Option<bool>,
    /// Where the program put the body.
    pub file: Option<PathBuf>,
}

/// What one process reported, on the run's clock.
#[derive(Debug, Clone, Default)]
pub(super) struct Reported {
    pub conns: Vec<ConnOut>,
    pub objects: Vec<ObjOut>,
    pub version: Option<String>,
    /// No timings of its own: its objects are the server's.
    pub server_timed: bool,
    /// Bodies checked from files, by object index (for server-timed objects).
    pub file_checks: BTreeMap<usize, Result<(), (ErrorKind, String)>>,
    /// Something about its output as a whole.
    pub problem: Option<(ErrorKind, String)>,
    /// How its reader placed its times (`anchor` may place them again).
    pub anchor: Option<AnchorEvent>,
    /// Outcomes it reported for URLs it was not given (or more than once): not objects.
    pub outside: u64,
}

impl Reported {
    pub(super) fn server_timed() -> Self {
        Self {
            server_timed: true,
            anchor: Some(AnchorEvent::Server),
            ..Self::default()
        }
    }
}

/// What recording left for the run's third-party record.
pub(super) struct Placed {
    pub version: Option<String>,
    pub timings: TimingSource,
    pub verified: u64,
    pub unverified: u64,
}

/// Why a process's objects that it never reported failed.
fn process_failure(e: &Ended) -> (ErrorKind, String) {
    let r = &e.record;
    let program = r.argv.first().map_or("the client", |p| p.as_str());
    if r.timed_out {
        return (
            ErrorKind::Timeout,
            format!(
                "{program} was killed at the deadline ({} ms)",
                r.wall_us / 1000
            ),
        );
    }
    let how = match (r.exit, r.signal) {
        (Some(c), _) => format!("exited with status {c}"),
        (_, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended".to_string(),
    };
    let why = r
        .stderr_tail
        .as_deref()
        .and_then(|t| t.lines().last())
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    (ErrorKind::Io, format!("{program} {how}{why}"))
}

fn info(alpn: Option<String>, local_port: Option<u16>) -> HandshakeInfo {
    HandshakeInfo {
        alpn,
        local_port,
        ..HandshakeInfo::default()
    }
}

/// Moves a process's times, laid from its spawn, to where the server places its first
/// connection (found by its port, or by QUIC's original destination CID): the packet the
/// client sent at `connected` arrived when the server accepted, a one-way delay later, so
/// what the program spent starting is not counted as fetching. How it was placed, or `None`
/// (the times stay where they were) when the server did not see that connection.
pub(super) fn anchor(r: &mut Reported, seen: Option<&Seen>, clock: Clock) -> Option<Anchor> {
    let seen = seen?;
    let (shift, anchor) = r.conns.iter().find_map(|c| {
        let s = seen.conns.iter().find(|s| match (&c.odcid, c.local_port) {
            (Some(id), _) => s.odcid.as_ref() == Some(id),
            (None, Some(port)) => s.peer.port() == port,
            (None, None) => false,
        })?;
        let (event, one_way) = match &c.odcid {
            Some(_) => (AnchorEvent::ServerQuicInitial, c.one_way),
            None => (
                AnchorEvent::ServerTcpAccept,
                c.one_way.or(s.handshake_rtt.map(|rtt| rtt / 2)),
            ),
        };
        let sent = clock
            .offset_of(s.accepted)
            .checked_sub(one_way.unwrap_or_default())?;
        let anchor = Anchor {
            event,
            one_way_us: one_way.map(|w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX)),
        };
        Some((sent.checked_sub(c.connected?)?, anchor))
    })?;
    for c in &mut r.conns {
        c.started += shift;
        c.handshake = c.handshake.map(|h| h + shift);
        c.connected = c.connected.map(|h| h + shift);
    }
    for o in &mut r.objects {
        o.sent += shift;
        o.headers = o.headers.map(|h| h + shift);
        o.done += shift;
    }
    r.anchor = Some(anchor.event);
    Some(anchor)
}

/// When the client first did something the run can see: its first connection attempt or
/// request by its own account, else the server's first accept.
pub(super) fn first_activity(
    outcomes: &[(Invocation, Ended, Reported)],
    seen: Option<&Seen>,
    clock: Clock,
) -> Option<Duration> {
    let own = outcomes
        .iter()
        .flat_map(|(_, _, r)| {
            r.conns
                .iter()
                .map(|c| c.started)
                .chain(r.objects.iter().map(|o| o.sent))
        })
        .min();
    let server = seen.and_then(|s| s.conns.iter().map(|c| clock.offset_of(c.accepted)).min());
    match (own, server) {
        (Some(o), Some(s)) => Some(o.min(s)),
        (o, s) => o.or(s),
    }
}

pub(super) fn record(
    ctx: &Ctx,
    rec: &mut Recorder,
    outcomes: &[(Invocation, Ended, Reported)],
    seen: Option<&Seen>,
    clock: Clock,
) -> Placed {
    let server_timed = outcomes.iter().any(|(_, _, r)| r.server_timed);
    let mut pass = Pass {
        ctx,
        seen,
        clock,
        by_path: BTreeMap::new(),
        placed: Placed {
            version: None,
            timings: match server_timed {
                true => TimingSource::Server,
                false => TimingSource::Client,
            },
            verified: 0,
            unverified: 0,
        },
    };
    // The server's requests by path, in the order it read them: server-timed objects are
    // these, and every object a client claims is checked against them.
    if let Some(seen) = seen {
        for (i, r) in seen.requests.iter().enumerate() {
            pass.by_path.entry(r.path.clone()).or_default().push_back(i);
        }
    }
    for (inv, ended, r) in outcomes {
        pass.placed.version = pass.placed.version.take().or_else(|| r.version.clone());
        if let Some((kind, msg)) = &r.problem {
            rec.error(*kind, msg);
        }
        if r.outside > 0 {
            rec.error(
                ErrorKind::Protocol,
                &format!(
                    "{} of its outcomes name URLs outside the run (or one more than once); \
                     not counted as objects",
                    r.outside
                ),
            );
        }
        let failed = (!ended.ok).then(|| process_failure(ended));
        let end = clock.offset_of(ended.spawned) + Duration::from_micros(ended.record.wall_us);
        match r.server_timed {
            true => pass.server_timed(rec, inv, r, failed.as_ref(), end),
            false => pass.client_timed(rec, inv, ended, r, failed.as_ref(), end),
        }
    }
    // A program that names no connections of its own has the server's. Recorded after the
    // processes' own outcomes: a connection the server saw no handshake on is the consequence
    // of what the client said went wrong (curl's exit code and message), which is the run's
    // first error.
    let server_conns = outcomes
        .iter()
        .any(|(_, _, r)| r.server_timed || r.conns.is_empty());
    if let (true, Some(seen)) = (server_conns, seen) {
        for c in &seen.conns {
            let id = rec.connection_started(clock.offset_of(c.accepted));
            match c.handshake {
                Some(h) => rec.handshake_done(
                    id,
                    clock.offset_of(h),
                    info(Some(ctx.proto.to_string()), Some(c.peer.port())),
                ),
                None => {
                    rec.connection_failed(id, ErrorKind::Tls, "no handshake seen by the server")
                }
            }
        }
    }
    pass.placed
}

/// The processes' outcomes as `record` goes through them.
struct Pass<'a> {
    ctx: &'a Ctx,
    seen: Option<&'a Seen>,
    clock: Clock,
    by_path: BTreeMap<String, VecDeque<usize>>,
    placed: Placed,
}

impl Pass<'_> {
    /// A process without timings of its own: its objects are the server's.
    fn server_timed(
        &mut self,
        rec: &mut Recorder,
        inv: &Invocation,
        r: &Reported,
        failed: Option<&(ErrorKind, String)>,
        end: Duration,
    ) {
        let mut errors = 0;
        for &i in &inv.objects {
            let (ctx, seen, clock) = (self.ctx, self.seen, self.clock);
            let o = server_object(ctx, i, seen, &mut self.by_path, r, failed, end, clock);
            match (&o.error, r.file_checks.get(&i)) {
                (None, Some(Ok(()))) => self.placed.verified += 1,
                _ => self.placed.unverified += 1,
            }
            errors += usize::from(o.error.is_some());
            rec.object(o);
        }
        if let (Some((k, m)), 0) = (failed, errors) {
            // The server handed over every body, yet the process failed (or was killed at the
            // deadline): whether it took them in, only it could say, so the run is not clean.
            rec.error(*k, m);
        }
    }

    /// A process with timings of its own: its connections and objects, each object it claims
    /// checked against the server's requests, and those it never reported failed.
    fn client_timed(
        &mut self,
        rec: &mut Recorder,
        inv: &Invocation,
        ended: &Ended,
        r: &Reported,
        failed: Option<&(ErrorKind, String)>,
        end: Duration,
    ) {
        for c in &r.conns {
            let id = rec.connection_started(c.started);
            match (&c.error, c.handshake) {
                (Some((k, m)), _) => rec.connection_failed(id, *k, m),
                (None, Some(h)) => rec.handshake_done(id, h, info(c.alpn.clone(), c.local_port)),
                (None, None) => {}
            }
        }
        let mut errors = 0;
        for o in &r.objects {
            let mut out = ObjectOutcome {
                intended: None,
                began: None,
                sent: o.sent,
                headers: o.headers,
                done: o.done.max(o.sent),
                body_bytes: o.bytes,
                error: o.error.clone().map(Box::new),
                status: o.status,
                stream: None,
            };
            check_claim(self.ctx, o, self.seen, &mut self.by_path, &mut out);
            errors += usize::from(out.error.is_some());
            match o.verified {
                Some(true) => self.placed.verified += 1,
                _ => self.placed.unverified += 1,
            }
            rec.object(out);
        }
        // Objects the process never reported (it died, hung or printed too little).
        let missing = inv.objects.len() - r.objects.len().min(inv.objects.len());
        let (kind, msg) = failed.cloned().unwrap_or_else(|| match ended.stdout_cut {
            0 => (
                ErrorKind::Io,
                "the client reported no outcome for it".to_string(),
            ),
            cut => (
                ErrorKind::Io,
                format!(
                    "its outcome was not read: the client's output passed the {} MiB qbench \
                     reads ({cut} lines past it)",
                    super::output::MAX_STDOUT >> 20
                ),
            ),
        });
        for _ in 0..missing {
            self.placed.unverified += 1;
            rec.object(ObjectOutcome {
                intended: None,
                began: None,
                sent: end,
                headers: None,
                done: end,
                body_bytes: 0,
                error: Some(Box::new((kind, msg.clone()))),
                status: None,
                stream: None,
            });
        }
        if let (Some((k, m)), 0, 0) = (failed, missing, errors) {
            // Every object went well by its account, yet the process failed: the run is not
            // clean.
            rec.error(*k, m);
        }
    }
}

/// The path the server logs for object `i`.
fn object_path(ctx: &Ctx, i: usize) -> String {
    ctx.objects[i]
        .url
        .parse::<http::Uri>()
        .map(|u| u.path().to_string())
        .unwrap_or_default()
}

/// The first request the server read for `path` not yet taken by an object.
fn take_seen<'a>(
    seen: Option<&'a Seen>,
    by_path: &mut BTreeMap<String, VecDeque<usize>>,
    path: &str,
) -> Option<&'a qbench_server::truth::RequestSeen> {
    let s = seen?;
    let k = by_path.get_mut(path)?.pop_front()?;
    s.requests.get(k)
}

/// An object a client says it fetched, checked against what the server saw of it (when the
/// server is this process's) and against the length its URL asks for: a claim the server
/// cannot back, or a body of another length, is a failure, whatever the client says.
fn check_claim(
    ctx: &Ctx,
    o: &ObjOut,
    seen: Option<&Seen>,
    by_path: &mut BTreeMap<String, VecDeque<usize>>,
    out: &mut ObjectOutcome,
) {
    let Some(i) = o.index else { return };
    let taken = take_seen(seen, by_path, &object_path(ctx, i));
    if out.error.is_some() {
        return;
    }
    // A server that kept no more requests (its bound) cannot deny what it did not keep.
    let full = seen.is_some_and(|s| s.dropped > 0);
    match (seen, taken) {
        (Some(_), None) if !full => {
            out.body_bytes = 0;
            out.error = Some(Box::new((
                ErrorKind::Io,
                "the client reports it fetched, but the server never saw this request".into(),
            )));
            return;
        }
        (_, Some(q)) if !(200..=299).contains(&q.status) => {
            out.error = Some(Box::new((
                ErrorKind::Status,
                format!(
                    "the client reports it fetched, but the server answered status {}",
                    q.status
                ),
            )));
            return;
        }
        (_, Some(q)) if !q.complete => {
            out.error = Some(Box::new((
                ErrorKind::ShortBody,
                format!(
                    "the client reports {} bytes, but the server handed over only {}",
                    o.bytes, q.body_bytes
                ),
            )));
            return;
        }
        _ => {}
    }
    if let Some(want) = ctx.objects[i].expected {
        let kind = match o.bytes.cmp(&want) {
            std::cmp::Ordering::Less => ErrorKind::ShortBody,
            std::cmp::Ordering::Greater => ErrorKind::LongBody,
            std::cmp::Ordering::Equal => return,
        };
        out.error = Some(Box::new((
            kind,
            format!("the client reports {} of {want} bytes", o.bytes),
        )));
    }
}

/// Object `i` as the server saw it: the first request for its path not yet taken.
#[allow(clippy::too_many_arguments)]
fn server_object(
    ctx: &Ctx,
    i: usize,
    seen: Option<&Seen>,
    by_path: &mut BTreeMap<String, VecDeque<usize>>,
    r: &Reported,
    failed: Option<&(ErrorKind, String)>,
    end: Duration,
    clock: Clock,
) -> ObjectOutcome {
    let obj = &ctx.objects[i];
    let taken = take_seen(seen, by_path, &object_path(ctx, i));
    let Some(q) = taken else {
        let (kind, msg) = failed.cloned().unwrap_or_else(|| {
            (
                ErrorKind::Io,
                match seen {
                    Some(_) => "the server never saw this request".to_string(),
                    None => "the client reports no timings and the server is not in this process"
                        .to_string(),
                },
            )
        });
        return ObjectOutcome {
            intended: None,
            began: None,
            sent: end,
            headers: None,
            done: end,
            body_bytes: 0,
            error: Some(Box::new((kind, msg))),
            status: None,
            stream: None,
        };
    };
    let sent = clock.offset_of(q.received);
    let done = q.last.map_or(end, |l| clock.offset_of(l)).max(sent);
    let mut error = match (q.status, q.complete) {
        (200..=299, true) => None,
        (200..=299, false) => Some((
            ErrorKind::Reset,
            "the server could not hand over the whole body".to_string(),
        )),
        (s, _) => Some((ErrorKind::Status, format!("status {s}"))),
    };
    if let (None, Some(n)) = (&error, obj.expected) {
        if q.body_bytes != n {
            error = Some((
                ErrorKind::ShortBody,
                format!("{} of {n} bytes", q.body_bytes),
            ));
        }
    }
    if error.is_none() {
        if let Some(Err((k, m))) = r.file_checks.get(&i) {
            error = Some((*k, m.clone()));
        }
    }
    ObjectOutcome {
        intended: None,
        began: None,
        sent,
        headers: q.head.map(|h| clock.offset_of(h)),
        done,
        body_bytes: q.body_bytes,
        error: error.map(Box::new),
        status: Some(q.status).filter(|s| *s != 0),
        stream: None,
    }
}

#[cfg(test)]
#[path = "place_tests.rs"]
mod tests;
