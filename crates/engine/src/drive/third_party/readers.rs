//! Reading what h2load and fetch-line programs printed, ngtcp2's qlog, and the bodies
//! programs left in files.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbench_core::client_program::lines::{FetchLine, Printed, Zero};
use qbench_core::client_program::qlog;
use qbench_core::errors::ErrorKind;
use qbench_core::report::third_party::AnchorEvent;
use qbench_core::wire::check_payload;

use super::output::{self, Kept};
use super::own_files::{self, OwnFileError};
use super::place::{ConnOut, ObjOut, Reported};
use super::process::Ended;
use super::{Ctx, Invocation};
use crate::measure::clock::Clock;

/// Where a program's zero lies on the run's clock.
fn zero_at(z: Zero, e: &Ended, clock: Clock) -> Duration {
    let spawned = clock.offset_of(e.spawned);
    match z {
        Zero::Monotonic(us) => clock.offset_of_monotonic(Duration::from_micros(us)),
        Zero::Unix(us) => {
            let spawn_unix = qbench_core::spec::start::unix_us(e.spawned_unix);
            // The wall clock's zero, moved by the spawn's place on both clocks.
            match us.checked_sub(spawn_unix) {
                Some(after) => spawned + Duration::from_micros(after),
                None => spawned.saturating_sub(Duration::from_micros(spawn_unix - us)),
            }
        }
    }
}

/// How far past a process's end its own times may lie: its zero on the wall clock is placed
/// by the wall clock read at its spawn, which may have been stepped since.
const LIFE_SLACK: Duration = Duration::from_secs(1);

/// Fetch lines on the run's clock. A line for a URL the process was not given (or one more
/// than it was given) is no object of the run: it is counted in `outside`. Lines whose
/// times lie after the process ended are refused as a whole.
pub(super) fn from_lines(
    ctx: &Ctx,
    inv: &Invocation,
    e: &Ended,
    clock: Clock,
    p: Printed,
) -> Reported {
    let zero = p
        .zero
        .map_or(clock.offset_of(e.spawned), |z| zero_at(z, e, clock));
    let at = |us: u64| zero + Duration::from_micros(us);
    let end = clock.offset_of(e.spawned) + Duration::from_micros(e.record.wall_us);
    if let Some(late) = p.lines.iter().filter_map(latest).max() {
        if at(late) > end + LIFE_SLACK {
            let mut r = Reported::server_timed();
            r.problem = Some((
                ErrorKind::Protocol,
                format!(
                    "its fetch lines: a time {} s after it ended",
                    (at(late) - end).as_secs()
                ),
            ));
            return r;
        }
    }
    let mut r = Reported {
        version: p.version,
        anchor: Some(match p.zero {
            Some(Zero::Monotonic(_)) => AnchorEvent::ClientMonotonic,
            Some(Zero::Unix(_)) => AnchorEvent::ClientWallClock,
            None => AnchorEvent::Spawn,
        }),
        ..Reported::default()
    };
    take_lines(ctx, inv, p.lines, at, &mut r);
    r
}

/// The process's lines as its connections and objects: each of its objects is taken by the
/// first line with its URL.
fn take_lines(
    ctx: &Ctx,
    inv: &Invocation,
    lines: Vec<FetchLine>,
    at: impl Fn(u64) -> Duration,
    r: &mut Reported,
) {
    let mut free: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for &i in &inv.objects {
        free.entry(ctx.objects[i].url.as_str())
            .or_default()
            .push_back(i);
    }
    for l in lines {
        match l {
            FetchLine::Connection {
                start_us,
                handshake_us,
                error,
                error_kind,
                ..
            } => r.conns.push(ConnOut {
                started: at(start_us),
                handshake: handshake_us.map(&at),
                error: error.map(|m| (error_kind.unwrap_or(ErrorKind::Io), m)),
                local_port: None,
                alpn: Some(ctx.proto.to_string()),
                connected: None,
                one_way: None,
                odcid: None,
            }),
            FetchLine::Request {
                url,
                start_us,
                headers_us,
                done_us,
                bytes,
                status,
                error,
                error_kind,
                verified,
                ..
            } => {
                let Some(index) = free.get_mut(url.as_str()).and_then(VecDeque::pop_front) else {
                    r.outside += 1;
                    continue;
                };
                let mut error = error.map(|m| (error_kind.unwrap_or(ErrorKind::Io), m));
                if error.is_none() && !matches!(status, Some(200..=299)) {
                    error = Some((ErrorKind::Status, format!("status {status:?}")));
                }
                r.objects.push(ObjOut {
                    index: Some(index),
                    sent: at(start_us),
                    headers: headers_us.map(&at),
                    done: at(done_us),
                    bytes,
                    status,
                    error,
                    verified,
                    file: None,
                });
            }
            FetchLine::Zero { .. } | FetchLine::Version { .. } => {}
        }
    }
}

/// A line's latest time, from the program's zero.
fn latest(l: &FetchLine) -> Option<u64> {
    match l {
        FetchLine::Connection {
            start_us,
            handshake_us,
            ..
        } => Some((*start_us).max(handshake_us.unwrap_or(0))),
        FetchLine::Request {
            start_us,
            headers_us,
            done_us,
            ..
        } => Some((*start_us).max(headers_us.unwrap_or(0)).max(*done_us)),
        FetchLine::Zero { .. } | FetchLine::Version { .. } => None,
    }
}

/// h2load run with one client (`-c 1`) per process: its log has one line per request
/// (start on the wall clock in µs, status, µs to the response's end), and requests go out in
/// the order of its URIs, so sorting by start names each line's object. Its wall clock is
/// placed by the wall clock read at its spawn. Its connection is its own too: h2load sends
/// its first requests as its connection is made (TCP connect and TLS), "time for connect"
/// after it began it, so the connection starts that long before the first request, not at
/// the spawn (h2load's start-up is not fetching).
pub(super) fn h2load(ctx: &Ctx, inv: &Invocation, e: &Ended, clock: Clock) -> Reported {
    let mut r = Reported {
        anchor: Some(AnchorEvent::ClientWallClock),
        ..Reported::default()
    };
    let parsed = match h2load_log(inv, &mut r) {
        Ok(p) => p,
        Err(problem) => {
            r.problem = Some(problem);
            return r;
        }
    };
    let summary = qbench_core::client_program::h2load::parse_summary(&e.stdout);
    let spawned = clock.offset_of(e.spawned);
    let place = |us: u64| zero_at(Zero::Unix(us), e, clock).max(spawned);
    let mut lines = parsed;
    lines.sort_by_key(|l| l.start_unix_us);
    let mut data = 0u64;
    for (k, l) in lines.iter().enumerate() {
        let Some(i) = inv.objects.get(k).copied() else {
            r.outside += 1;
            continue;
        };
        let (index, expected) = (Some(i), ctx.objects[i].expected);
        let ok = (200..=299).contains(&l.status);
        // h2load counts body bytes per run, not per request: a whole answer carries the
        // size its URI asked for, and the run's total is checked below.
        let bytes = if ok { expected.unwrap_or(0) } else { 0 };
        data += bytes;
        let sent = place(l.start_unix_us);
        r.objects.push(ObjOut {
            index,
            sent,
            headers: None,
            done: sent + Duration::from_micros(l.elapsed_us),
            bytes,
            status: Some(l.status).filter(|s| *s != 0),
            error: (!ok).then(|| (ErrorKind::Status, format!("status {}", l.status))),
            verified: None,
            file: None,
        });
    }
    if let Some(s) = summary {
        h2load_summary(ctx, &s, spawned, data, &mut r);
    }
    r
}

/// h2load's log of requests: none when it died before it wrote one (its objects are then
/// unreported), its lines past what qbench reads a problem of the run.
fn h2load_log(
    inv: &Invocation,
    r: &mut Reported,
) -> Result<Vec<qbench_core::client_program::h2load::LogLine>, (ErrorKind, String)> {
    let log = match own_files::open(&inv.dir, &inv.dir.join("requests.log")) {
        Ok(f) => {
            let kept = Arc::new(Mutex::new(Kept::default()));
            output::lines(f, &kept, own_files::MAX_H2LOAD_LOG);
            output::take(&kept)
        }
        Err(OwnFileError::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound => Kept::default(),
        Err(err) => return Err((ErrorKind::Io, format!("its log {err}"))),
    };
    if log.cut > 0 {
        r.problem = Some((
            ErrorKind::Io,
            format!(
                "its log passed the {} MiB qbench reads: {} lines not read",
                own_files::MAX_H2LOAD_LOG >> 20,
                log.cut
            ),
        ));
    }
    qbench_core::client_program::h2load::parse_log(&String::from_utf8_lossy(&log.text))
        .map_err(|err| (ErrorKind::Protocol, err.to_string()))
}

/// h2load's summary: its connection, placed before its first logged request by its mean
/// connect time, and its body bytes against those its logged answers ask for.
fn h2load_summary(
    ctx: &Ctx,
    s: &qbench_core::client_program::h2load::Summary,
    spawned: Duration,
    data: u64,
    r: &mut Reported,
) {
    if s.connections_ok > 0 {
        let connect = Duration::from_micros(s.connect_mean_us.unwrap_or(0));
        // Without a logged request the connection has no place of its own.
        let made = r.objects.iter().map(|o| o.sent).min();
        if made.is_none() {
            r.anchor = Some(AnchorEvent::Spawn);
        }
        let made = made.unwrap_or(spawned + connect);
        r.conns.push(ConnOut {
            started: made.saturating_sub(connect).max(spawned),
            handshake: Some(made),
            error: None,
            local_port: None,
            alpn: Some(ctx.proto.to_string()),
            connected: None,
            one_way: None,
            odcid: None,
        });
    }
    if s.data_bytes != data && r.problem.is_none() {
        r.problem = Some((
            ErrorKind::ShortBody,
            format!(
                "h2load received {} body bytes; the answers it logged ask for {data}",
                s.data_bytes
            ),
        ));
    }
}

/// Where ngtcp2's example client writes its qlog, in its process's directory.
pub(super) const NGTCP2_QLOG: &str = "qlog";

/// ngtcp2's example client names each download by its URL's last segment, query included,
/// so objects of one size would share a file and only the last be checked: a repeated name
/// gets a query of its own (the server routes by the path alone). Each object's URL and its
/// file name, none where the segment is no file name.
pub(super) fn ngtcp2_downloads(ctx: &Ctx, objects: &[usize]) -> Vec<(String, Option<String>)> {
    let last = |i: usize| ctx.objects[i].url.rsplit('/').next().unwrap_or_default();
    // Counted once: asking every object how many share its name was quadratic (40,000
    // objects took minutes before the first process ran).
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for &i in objects {
        *uses.entry(last(i)).or_default() += 1;
    }
    objects
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let url = &ctx.objects[i].url;
            let name = last(i);
            let repeated = uses.get(name).is_some_and(|&n| n > 1);
            let (url, name) = match repeated && !url.contains(['?', '#']) {
                true => (format!("{url}?k={k}"), format!("{name}?k={k}")),
                false => (url.clone(), name.to_string()),
            };
            let file = !(name.is_empty() || name == "." || name == "..");
            (url, file.then_some(name))
        })
        .collect()
}

/// ngtcp2's example client prints no timings; its qlog (one file per connection, one
/// connection per process) is its own account, laid from the spawn (`anchor` then moves it
/// so that its first Initial reaches the server, half its first round trip later, as the
/// server takes it). Its requests open client bidirectional streams 0, 4, 8… in URL
/// order, and its downloads are named as `ngtcp2_downloads` says. Without a qlog (it never
/// started a connection) its objects are the server's.
pub(super) fn ngtcp2(ctx: &Ctx, inv: &Invocation, e: &Ended, clock: Clock) -> Reported {
    let file = std::fs::read_dir(inv.dir.join(NGTCP2_QLOG))
        .ok()
        .and_then(|d| {
            d.flatten()
                .map(|f| f.path())
                .find(|p| p.extension().is_some_and(|x| x == "sqlog"))
        });
    let Some(file) = file else {
        return Reported::server_timed();
    };
    let q = match own_files::read_bounded(&inv.dir, &file, qlog::MAX_QLOG).map(|t| qlog::parse(&t))
    {
        Ok(Ok(q)) => q,
        Ok(Err(err)) => {
            let mut r = Reported::server_timed();
            r.problem = Some((ErrorKind::Protocol, format!("its qlog: {err}")));
            return r;
        }
        Err(err) => {
            let mut r = Reported::server_timed();
            r.problem = Some((ErrorKind::Io, format!("its qlog {err}")));
            return r;
        }
    };
    let spawned = clock.offset_of(e.spawned);
    let at = |ms: f64| spawned + Duration::try_from_secs_f64(ms / 1000.0).unwrap_or_default();
    let mut r = Reported {
        anchor: Some(AnchorEvent::Spawn),
        ..Reported::default()
    };
    if let Some(first) = q.first_sent_ms {
        let error = match (q.handshake_ms, q.first_received_ms) {
            (Some(_), _) => None,
            (None, None) => Some((ErrorKind::Timeout, "no packet from the server".into())),
            (None, Some(_)) => Some((ErrorKind::Tls, "the handshake never completed".into())),
        };
        r.conns.push(ConnOut {
            started: at(first),
            handshake: q.handshake_ms.map(at),
            error,
            local_port: None,
            alpn: Some(ctx.proto.to_string()),
            connected: q.first_received_ms.map(|_| at(first)),
            one_way: q
                .first_received_ms
                .map(|rx| Duration::try_from_secs_f64((rx - first) / 2000.0).unwrap_or_default()),
            odcid: q.odcid.clone(),
        });
    }
    let downloads = ngtcp2_downloads(ctx, &inv.objects);
    for (k, (&i, (_, name))) in inv.objects.iter().zip(downloads).enumerate() {
        let Some(s) = q.streams.get(&(4 * k as u64)) else {
            continue;
        };
        let (Some(sent), Some(done)) = (s.first_sent_ms, s.done_ms) else {
            continue;
        };
        let file = name.map(|n| inv.dir.join(n));
        // Its own name, not what a link there points at.
        let bytes = file
            .as_ref()
            .and_then(|f| std::fs::symlink_metadata(f).ok())
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.len());
        r.objects.push(ObjOut {
            index: Some(i),
            sent: at(sent),
            headers: s.first_received_ms.map(at),
            done: at(done),
            bytes,
            status: None,
            error: None,
            verified: None,
            file,
        });
    }
    r
}

/// Checks bodies the program left in files: curl's outputs, ngtcp2's downloads.
pub(super) fn check_files(ctx: &Ctx, inv: &Invocation, r: &mut Reported) {
    for o in &mut r.objects {
        let Some(f) = &o.file else { continue };
        let expected = o.index.and_then(|i| ctx.objects[i].expected);
        let v = check_file(&inv.dir, f, expected);
        o.verified = Some(v.is_ok());
        if let (Err(e), None) = (v, &o.error) {
            o.error = Some(e);
        }
    }
    // Only ngtcp2's example client names its downloads (by the URL's last segment); an
    // `exec:` program's files are its own business.
    if !r.server_timed
        || !matches!(
            ctx.program,
            qbench_core::client_program::ClientProgram::Ngtcp2
        )
    {
        return;
    }
    let downloads = ngtcp2_downloads(ctx, &inv.objects);
    for (&i, (_, name)) in inv.objects.iter().zip(downloads) {
        let Some(name) = name else { continue };
        let v = check_file(&inv.dir, &inv.dir.join(name), ctx.objects[i].expected);
        r.file_checks.insert(i, v);
    }
}

/// Reads a body file of the process's own directory, at most a byte past the length asked.
fn check_file(dir: &Path, path: &Path, expected: Option<u64>) -> Result<(), (ErrorKind, String)> {
    let f =
        own_files::open(dir, path).map_err(|e| (ErrorKind::Io, format!("its body file {e}")))?;
    let mut f = f.take(expected.map_or(u64::MAX, |n| n.saturating_add(1)));
    let mut buf = vec![0u8; 256 * 1024];
    let mut offset = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| (ErrorKind::Io, format!("reading {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        if let Err(at) = check_payload(offset, &buf[..n]) {
            return Err((
                ErrorKind::BodyMismatch,
                format!("wrong byte at offset {at}"),
            ));
        }
        offset += n as u64;
    }
    match expected {
        Some(want) if offset < want => {
            Err((ErrorKind::ShortBody, format!("{offset} of {want} bytes")))
        }
        Some(want) if offset > want => {
            Err((ErrorKind::LongBody, format!("{offset} of {want} bytes")))
        }
        _ => Ok(()),
    }
}
