//! The runner against the mock transport on tokio's paused clock: which connection each
//! object goes to, how many are in flight, what `--reuse` keeps, and what a timeout or a
//! refused connection leaves in the report.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use qbench_core::wire::bytes_path;
use qbench_core::ErrorKind;

use super::{abort_reason, Plan, Runner};
use crate::drive::requests::Requests;
use crate::measure::clock::Clock;
use crate::transport::mock::{MockTransport, Script, Seen};
use crate::transport::ObjectReq;

/// Objects of 1..=n bytes, so each path names its object.
pub(super) fn plan(n: u64, connections: usize, streams: Option<usize>, reuse: bool) -> Plan {
    Plan {
        requests: Arc::new(Requests::new(n, false, |i| ObjectReq {
            uri: format!("https://mock{}", bytes_path(i + 1))
                .parse()
                .unwrap(),
            expected_len: Some(i + 1),
            verify: true,
        })),
        connections,
        streams,
        reuse,
        telemetry_uri: None,
        cwnd_cap: None,
        load: None,
        shard: None,
        log: None,
        interval: None,
        app: None,
    }
}

pub(super) fn runner(script: Script, plan: Plan) -> (Runner, Arc<Seen>) {
    let clock = Clock::paused();
    let t = MockTransport::new(script, clock);
    let seen = t.seen.clone();
    (Runner::new(Box::new(t), plan, clock), seen)
}

fn ms(v: u64) -> u64 {
    v * 1000
}

/// HdrHistogram at 3 significant digits reports a value as the bounds of its bucket.
fn within_precision(got: Option<u64>, want: u64) -> bool {
    got.is_some_and(|g| g.abs_diff(want) * 1000 <= want)
}

#[tokio::test(start_paused = true)]
async fn objects_go_round_robin_over_connections() {
    let (mut r, seen) = runner(Script::default(), plan(7, 3, None, false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!(rep.objects.completed, 7);
    assert_eq!(rep.payload_bytes, (1..=7).sum::<u64>());
    let mut got = seen.requests.lock().unwrap().clone();
    for paths in &mut got {
        paths.sort();
    }
    got.sort();
    let want = [vec![1, 4, 7], vec![2, 5], vec![3, 6]]
        .map(|ids| ids.into_iter().map(bytes_path).collect::<Vec<_>>());
    assert_eq!(got, want);
    assert_eq!(rep.connections.len(), 3);
    assert!(rep
        .connections
        .iter()
        .all(|c| c.handshake_us == Some(ms(10))));
}

#[tokio::test(start_paused = true)]
async fn streams_bound_concurrency_and_queueing_counts_in_plt() {
    let (mut r, seen) = runner(Script::default(), plan(10, 1, Some(3), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!(*seen.peak_in_flight.lock().unwrap(), vec![3]);
    // 10 ms handshake, then ceil(10 / 3) = 4 waves of 5 ms TTFB + 20 ms body.
    assert_eq!(rep.plt_us, Some(ms(10 + 4 * 25)));
    // Objects are timed from their own request, not from when they were queued: every one
    // took 25 ms (to the histogram's 3 significant digits).
    let lat = &rep.object_latency.summary;
    assert_eq!(lat.count, 10);
    assert!(within_precision(lat.min_us, ms(25)) && within_precision(lat.max_us, ms(25)));
    let ttfb = &rep.ttfb.summary;
    assert!(within_precision(ttfb.min_us, ms(5)) && within_precision(ttfb.max_us, ms(5)));
}

/// More workers than the peer allows streams: requests past the limit wait before their
/// timer starts, so every object still takes exactly its own 25 ms; the wait is in PLT. The
/// report keeps the limit and each run's own peak, also for a connection kept by `--reuse`.
#[tokio::test(start_paused = true)]
async fn the_peers_stream_limit_gates_requests_before_their_timers_start() {
    let script = Script {
        max_streams: Some(2),
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(6, 1, Some(5), true));
    for index in 0..2 {
        let rep = r.run(index, &crate::observe::unobserved()).await;
        assert!(rep.complete, "{:?}", rep.first_error);
        assert_eq!(*seen.peak_in_flight.lock().unwrap(), vec![2]);
        let handshake = if index == 0 { 10 } else { 0 };
        assert_eq!(rep.plt_us, Some(ms(handshake + 3 * 25)));
        let lat = &rep.object_latency.summary;
        assert!(within_precision(lat.min_us, ms(25)) && within_precision(lat.max_us, ms(25)));
        let c = &rep.connections[0];
        assert_eq!((c.server_max_streams, c.peak_streams), (Some(2), 2));
    }
    r.finish().await;
}

#[tokio::test(start_paused = true)]
async fn without_streams_everything_is_in_flight_at_once() {
    let (mut r, seen) = runner(Script::default(), plan(8, 2, None, false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert_eq!(*seen.peak_in_flight.lock().unwrap(), vec![4, 4]);
    assert_eq!(rep.plt_us, Some(ms(10 + 25)));
}

#[tokio::test(start_paused = true)]
async fn reuse_keeps_the_first_runs_connections() {
    let (mut r, seen) = runner(Script::default(), plan(4, 2, None, true));
    let first = r.run(0, &crate::observe::unobserved()).await;
    let second = r.run(1, &crate::observe::unobserved()).await;
    assert!(first.complete && second.complete);
    assert_eq!(seen.connects.load(Ordering::SeqCst), 2);
    assert_eq!(seen.closes.load(Ordering::SeqCst), 0);
    assert!(second.connections.iter().all(|c| c.handshake_us.is_none()));
    // No handshake in the second run: its page loads in one wave.
    assert_eq!(second.plt_us, Some(ms(25)));
    r.finish().await;
    assert_eq!(seen.closes.load(Ordering::SeqCst), 2);

    let (mut fresh, seen) = runner(Script::default(), plan(4, 2, None, false));
    fresh.run(0, &crate::observe::unobserved()).await;
    fresh.run(1, &crate::observe::unobserved()).await;
    assert_eq!(seen.connects.load(Ordering::SeqCst), 4);
    assert_eq!(seen.closes.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_object_times_out_and_the_rest_complete() {
    let script = Script {
        stall: [bytes_path(3)].into(),
        timeout: Duration::from_secs(2),
        ..Script::default()
    };
    let (mut r, _) = runner(script, plan(5, 1, Some(2), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(!rep.complete);
    assert_eq!(rep.plt_us, None);
    assert_eq!((rep.objects.completed, rep.objects.failed), (4, 1));
    assert_eq!(rep.errors.0.get(&ErrorKind::Timeout), Some(&1));
    assert_eq!(rep.errors.total(), 1);
    let first = rep.first_error.clone().unwrap();
    assert!(
        first.starts_with("timeout: waiting for response headers: no progress for 2s"),
        "{first}"
    );
    // Objects 1 and 2 go first; 3 goes out when one of them ends (10 + 25 ms) and the run
    // lasts until its timeout fires, no longer.
    assert_eq!(rep.duration_us, ms(10 + 25 + 2000));
    assert_eq!(abort_reason(&rep), None);
}

#[tokio::test(start_paused = true)]
async fn refused_connections_abort_with_every_object_not_started() {
    let script = Script {
        refuse: Some(ErrorKind::Refused),
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(6, 2, None, false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(!rep.complete);
    assert_eq!(rep.errors.0.get(&ErrorKind::Refused), Some(&2));
    assert_eq!(rep.errors.total(), 2);
    assert_eq!(rep.objects.not_started, 6);
    assert_eq!(rep.payload_bytes, 0);
    assert!(rep
        .connections
        .iter()
        .all(|c| c.error == Some(ErrorKind::Refused) && c.handshake_us.is_none()));
    assert_eq!(seen.connects.load(Ordering::SeqCst), 0);
    assert_eq!(
        abort_reason(&rep).as_deref(),
        Some("no connection could be established")
    );
}

mod hold_tests;
mod pinned_tests;
