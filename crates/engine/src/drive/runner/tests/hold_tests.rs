//! Held loads against the mock transport on tokio's paused clock: every start time, lag and
//! latency is exact, so the scheduler's accounting is checked to the microsecond.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbench_core::report::load::LoadMode;
use qbench_core::spec::load::{Arrivals, Load};
use qbench_core::RunReport;

use super::{plan, runner, within_precision};
use crate::transport::mock::Script;

fn load(duration_ms: u64, warmup_ms: u64, rate: Option<f64>, max_inflight: u32) -> Load {
    Load {
        duration: Duration::from_millis(duration_ms),
        warmup: Duration::from_millis(warmup_ms),
        rate,
        arrivals: Arrivals::Constant,
        max_inflight,
    }
}

/// Objects of 1..=`objects` bytes, cycled.
async fn held(script: Script, objects: u64, streams: Option<usize>, l: Load) -> RunReport {
    let mut p = plan(objects, 1, streams, false);
    p.load = Some(l);
    let (mut r, _) = runner(script, p);
    r.run(0, &crate::observe::unobserved()).await
}

fn us(ms: u64) -> u64 {
    ms * 1000
}

/// Closed loop: 3 workers, 25 ms per object, held 100 ms after a 50 ms warm-up of 150 ms:
/// starts at 0, 25, ..., 125 ms, so 6 waves of 3; the first 2 are the warm-up's.
#[tokio::test(start_paused = true)]
async fn a_closed_loop_cycles_for_the_duration_and_leaves_out_the_warmup() {
    let rep = held(Script::default(), 4, Some(3), load(150, 50, None, 1)).await;
    let l = rep.load.as_ref().expect("a held load");
    assert_eq!(l.mode, LoadMode::Closed);
    assert_eq!(l.warmup_requests, 6);
    assert_eq!(rep.objects.completed, 12);
    assert_eq!(rep.objects.requested, 12);
    assert!(rep.complete);
    assert_eq!(rep.plt_us, None, "a held load has no page load time");
    assert_eq!(l.window_us, us(100));
    assert!(
        (l.achieved_rate - 120.0).abs() < 1e-9,
        "{}",
        l.achieved_rate
    );
    // 4 objects of 1..=4 bytes, cycled: 3 cycles of 10 bytes in the measured 12.
    assert_eq!(rep.payload_bytes, 30);
}

/// Open loop at 1000/s: one request every millisecond exactly, none late, and latency
/// from the intended start equals the service time when nothing holds a request back.
#[tokio::test(start_paused = true)]
async fn an_open_loop_starts_requests_on_schedule() {
    let rep = held(Script::default(), 4, None, load(100, 0, Some(1000.0), 1000)).await;
    let l = rep.load.as_ref().unwrap();
    assert_eq!(l.mode, LoadMode::Open);
    assert_eq!(rep.objects.completed, 100);
    assert_eq!((l.late, l.dropped), (0, 0));
    assert!((l.achieved_rate - 1000.0).abs() < 1e-9);
    assert_eq!(l.lag.as_ref().unwrap().summary.max_us, Some(0));
    let service = &l.service_time.as_ref().unwrap().summary;
    let latency = &rep.object_latency.summary;
    assert!(within_precision(service.max_us, us(25)));
    assert_eq!(latency.max_us, service.max_us);
}

/// One stream (as on an h1 connection) and a 100 ms stall on the first object: the requests
/// due meanwhile wait for the stream. They start late, the lag says by how much, and their
/// latency from the intended start includes the stall, while the service time does not. The
/// client took each up on time: the wait was the connection's, and the client is not blamed.
#[tokio::test(start_paused = true)]
async fn a_stall_shows_in_the_latency_from_the_intended_start() {
    let script = Script {
        max_streams: Some(1),
        ttfb: Duration::from_millis(1),
        body: Duration::ZERO,
        slow: vec![("/bytes/1".into(), Duration::from_millis(100))],
        timeout: Duration::from_secs(10),
        ..Script::default()
    };
    let rep = held(script, 1000, None, load(50, 0, Some(1000.0), 1000)).await;
    let l = rep.load.as_ref().unwrap();
    assert_eq!(rep.objects.completed, 50);
    // Due at 1, 2, ... 49 ms; all sent after the stall ends at 101 ms.
    assert_eq!(l.late, 49);
    let lag = &l.lag.as_ref().unwrap().summary;
    assert!(within_precision(lag.max_us, us(101 - 1)), "{lag:?}");
    assert_eq!(l.client_late, 0);
    assert_eq!(l.client_lag.as_ref().unwrap().summary.max_us, Some(0));
    let verdict = rep.client.as_ref().and_then(|c| c.saturated.clone());
    assert!(
        !verdict.as_deref().unwrap_or("").contains("taken up"),
        "{verdict:?}"
    );
    // Request k, due at k ms, ends at 101 + k ms: every latency is 101 ms.
    let latency = &rep.object_latency.summary;
    assert!(within_precision(latency.p50_us, us(101)), "{latency:?}");
    assert!(within_precision(latency.min_us, us(101)), "{latency:?}");
    let service = &l.service_time.as_ref().unwrap().summary;
    assert!(within_precision(service.max_us, us(101)), "the stalled one");
    assert!(within_precision(service.p90_us, us(1)), "{service:?}");
}

/// At most 5 in flight and responses of 20 ms at 1000/s: after 5 requests, the ones due
/// while 5 are in flight are dropped; none is sent late.
#[tokio::test(start_paused = true)]
async fn max_inflight_drops_and_never_delays() {
    let script = Script {
        ttfb: Duration::from_millis(20),
        body: Duration::ZERO,
        ..Script::default()
    };
    let rep = held(script, 4, None, load(100, 0, Some(1000.0), 5)).await;
    let l = rep.load.as_ref().unwrap();
    assert!(l.dropped > 0);
    assert_eq!(rep.objects.completed + l.dropped, 100);
    assert_eq!(rep.objects.not_started, l.dropped);
    assert_eq!(l.late, 0);
    assert_eq!(l.lag.as_ref().unwrap().summary.max_us, Some(0));
    assert!(rep.complete, "dropped requests are counted, not errors");
}

/// What an observer was told of each interval: its run and requests completed.
#[derive(Default)]
struct Intervals(Mutex<Vec<(u32, u64)>>);

impl crate::observe::Observer for Intervals {
    fn interval(&self, run: u32, r: &qbench_core::report::load::IntervalRecord) {
        self.0.lock().unwrap().push((run, r.completed));
    }
}

/// Intervals of 20 ms over an open loop of 100 ms: contiguous, and their counts and
/// histograms add up to the run's own (the warm-up's included, and marked); the observer
/// is told of each, as the run's.
#[tokio::test(start_paused = true)]
async fn intervals_add_up_to_the_run() {
    let seen = Arc::new(Intervals::default());
    let mut p = plan(4, 1, None, false);
    p.load = Some(load(100, 20, Some(500.0), 1000));
    p.interval = Some(Duration::from_millis(20));
    let (mut r, _) = runner(Script::default(), p);
    let rep = r
        .run(2, &crate::observe::Observing::new(seen.clone()))
        .await;
    let iv = &rep.intervals;
    assert!(iv.windows(2).all(|w| w[0].end_us == w[1].start_us));
    // The intervals with the warm-up's requests are marked, the last is not; one with none
    // (the handshake's) is not, as nothing in it was left out.
    assert!(iv.iter().any(|i| i.warmup) && !iv.last().unwrap().warmup);
    assert!(iv
        .iter()
        .filter(|i| i.warmup)
        .all(|i| i.completed + i.failed + i.dropped > 0));
    let total: u64 = iv.iter().map(|i| i.completed).sum();
    let warm = rep.load.as_ref().unwrap().warmup_requests;
    assert_eq!(total, rep.objects.completed + warm);
    let mut merged = qbench_core::LatencyHistogram::new();
    for i in iv {
        merged.merge(&i.latency.histogram().unwrap()).unwrap();
    }
    assert_eq!(merged.len(), total);
    assert_eq!(
        *seen.0.lock().unwrap(),
        iv.iter().map(|i| (2, i.completed)).collect::<Vec<_>>()
    );
}

/// Held for 10 s but stopped (a signal, `--fail-early`) 150 ms in: the window ends at the
/// stop, 90 ms after the warm-up's end (10 ms handshake, 50 ms warm-up), and the rates are
/// per second of those 90 ms, where the 10 s asked for read a rate 111 times too low.
#[tokio::test(start_paused = true)]
async fn a_stopped_load_is_measured_over_what_was_held() {
    let mut p = plan(4, 1, Some(3), false);
    p.load = Some(load(10_000, 50, None, 1));
    let (mut r, _) = runner(Script::default(), p);
    let stop = r.stopper();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        stop.stop();
    });
    let rep = r.run(0, &crate::observe::unobserved()).await;
    let l = rep.load.as_ref().expect("a held load");
    assert_eq!(l.window_start_us, us(60));
    assert_eq!(l.window_us, us(90));
    // Starts at 60, 85, 110, 135 ms: 4 waves of 3 in the window.
    assert_eq!(l.sent, 12);
    let rate = l.sent as f64 / 0.090;
    assert!((l.achieved_rate - rate).abs() < 1e-6, "{}", l.achieved_rate);
}

/// 32 workers on one connection whose server allows 2 streams, 25 ms per object, held 1,005
/// ms from the 10 ms handshake: the 41st pair starts at 1,010 ms and ends at 1,035, and the 28
/// requests still waiting for a stream at the end (1,015 ms) are dropped unsent. Before, they
/// were sent after the end and counted: 112 requests, the load 15 pairs longer.
#[tokio::test(start_paused = true)]
async fn requests_waiting_for_a_stream_at_the_end_are_dropped_unsent() {
    let script = Script {
        max_streams: Some(2),
        ..Script::default()
    };
    let rep = held(script, 4, Some(32), load(1005, 0, None, 1)).await;
    let l = rep.load.as_ref().expect("a held load");
    assert_eq!(rep.objects.completed, 82);
    assert_eq!(rep.objects.failed, 0, "{:?}", rep.first_error);
    assert_eq!(l.sent, 82);
    assert_eq!(rep.last_byte_us, Some(us(1035)));
    assert_eq!(rep.connections[0].peak_streams, 2);
}

/// The same connection with 200 fixed objects, stopped (a signal) at 100 ms: the pair on the
/// wire (sent at 85 ms) ends at 110 ms, and the 30 waiting for a stream are not started, as
/// the rest are, where they were sent after the stop and made it 15 pairs longer.
#[tokio::test(start_paused = true)]
async fn a_stop_drops_the_requests_waiting_for_a_stream() {
    let script = Script {
        max_streams: Some(2),
        ..Script::default()
    };
    let (mut r, _) = runner(script, plan(200, 1, Some(32), false));
    let stop = r.stopper();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.stop();
    });
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(!rep.complete);
    assert_eq!(rep.objects.completed, 8);
    assert_eq!(rep.objects.failed, 0, "{:?}", rep.first_error);
    assert_eq!(rep.objects.not_started, 192);
    assert_eq!(rep.last_byte_us, Some(us(110)));
}
