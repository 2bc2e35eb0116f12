//! Drives a workload over a transport and feeds the recorder.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use http::Uri;
use indicatif::ProgressBar;
use qbench_core::ccstate::StateMachine;
use qbench_core::telemetry::Timeline;
use qbench_core::{ErrorKind, HandshakeInfo, Recorder, RunReport};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::transport::{fetch, get_body, Conn, ObjectReq, Transport};
use crate::verify::DigestBook;

pub struct Plan {
    pub requests: Vec<Arc<ObjectReq>>,
    pub connections: usize,
    /// Concurrent requests per connection; `None` = all at once.
    pub streams: Option<usize>,
    pub reuse: bool,
    /// Where to fetch each connection's sender telemetry after the run.
    pub telemetry_uri: Option<Uri>,
}

/// Connections kept open between runs with `--reuse`.
pub struct Warm<C> {
    conns: Vec<(C, HandshakeInfo)>,
}

fn lock(rec: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    rec.lock().expect("recorder lock")
}

/// One run. Returns the report and, with `plan.reuse`, the connections to reuse.
pub async fn run_once<T: Transport>(
    transport: &T,
    index: u32,
    plan: &Plan,
    clock: Clock,
    warm: Option<Warm<T::Conn>>,
    progress: &ProgressBar,
) -> (RunReport, Option<Warm<T::Conn>>) {
    let rec = Arc::new(Mutex::new(Recorder::new(
        index,
        plan.requests.len() as u64,
        clock.now(),
    )));
    let mut tasks = JoinSet::new();
    let book = Arc::new(DigestBook::default());
    let conns: Vec<(T::Conn, HandshakeInfo)> = match warm {
        Some(w) => {
            for (_, info) in &w.conns {
                lock(&rec).connection_reused(info.clone());
            }
            w.conns
        }
        None => {
            let attempts = (0..plan.connections).map(|_| {
                let id = lock(&rec).connection_started(clock.now());
                async move { (id, transport.connect().await) }
            });
            let mut up = Vec::new();
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
                            None => lock(&rec).handshake_done(id, c.done, c.info.clone()),
                        }
                        up.push((c.conn, c.info));
                    }
                    Err(e) => lock(&rec).connection_failed(id, e.kind, &e.message),
                }
            }
            up
        }
    };

    if !conns.is_empty() {
        let k = conns.len();
        for (ci, (conn, _)) in conns.iter().enumerate() {
            let reqs: Arc<Vec<Arc<ObjectReq>>> =
                Arc::new(plan.requests.iter().skip(ci).step_by(k).cloned().collect());
            // A fixed pool of workers pulling the next request: the same concurrency as one
            // task per request behind a semaphore, without thousands of parked tasks.
            let workers = plan.streams.unwrap_or(reqs.len()).min(reqs.len());
            let next = Arc::new(AtomicUsize::new(0));
            for _ in 0..workers {
                let (conn, reqs, next, rec, bar, book) = (
                    conn.clone(),
                    reqs.clone(),
                    next.clone(),
                    rec.clone(),
                    progress.clone(),
                    book.clone(),
                );
                tasks.spawn(async move {
                    while let Some(req) = reqs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let outcome = fetch_one(&conn, &clock, req, &book).await;
                        bar.inc(1);
                        lock(&rec).object(outcome);
                    }
                });
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    let mut report = Arc::try_unwrap(rec)
        .map_err(|_| ())
        .expect("all tasks finished")
        .into_inner()
        .expect("recorder lock")
        .finish(clock.now());
    if plan
        .requests
        .iter()
        .any(|r| r.verify && r.expected_len.is_none())
    {
        let book = Arc::try_unwrap(book).expect("all tasks finished");
        report.digests = Some(book.into_map());
    }
    if let Some(uri) = &plan.telemetry_uri {
        let timelines = fetch_telemetry(conns.iter().map(|(c, _)| c), uri).await;
        if !timelines.is_empty() {
            let refs: Vec<&Timeline> = timelines.iter().collect();
            report.cc_states = Some(StateMachine::infer(&refs));
            report.telemetry = Some(timelines);
        }
    }
    let keep = plan.reuse && !conns.is_empty() && report.complete;
    if keep {
        return (report, Some(Warm { conns }));
    }
    for (c, _) in &conns {
        c.close().await;
    }
    (report, None)
}

/// Fetches one object; a body whose digest differs from an earlier fetch of the same URL
/// counts as a mismatch.
async fn fetch_one<C: Conn>(
    conn: &C,
    clock: &Clock,
    req: &ObjectReq,
    book: &DigestBook,
) -> qbench_core::ObjectOutcome {
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

async fn fetch_telemetry<'a, C: Conn>(
    conns: impl Iterator<Item = &'a C>,
    uri: &Uri,
) -> Vec<Timeline> {
    let mut out = Vec::new();
    for c in conns {
        match get_body(c, uri, qbench_core::wire::MAX_TELEMETRY_BYTES).await {
            Ok(body) => match serde_json::from_slice::<Timeline>(&body) {
                Ok(t) => out.push(t),
                Err(e) => eprintln!("warning: telemetry from {uri} is not a timeline: {e}"),
            },
            Err(e) => eprintln!("warning: no telemetry from {uri}: {}", e.message),
        }
    }
    out
}
