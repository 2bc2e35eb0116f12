//! Pinned client threads against the mock transport on the real clock (pinned runtimes have
//! timers of their own, which tokio's paused clock does not drive): every request of a
//! connection runs on the thread the connection was made on, in a closed and an open loop.

use std::collections::BTreeSet;
use std::time::Duration;

use qbench_core::spec::load::{Arrivals, Load};

use super::plan;
use crate::drive::runner::Runner;
use crate::measure::clock::Clock;
use crate::transport::mock::{MockTransport, Script};
use crate::transport::pinned::Pinned;

fn quick() -> Script {
    Script {
        handshake: Duration::from_millis(1),
        ttfb: Duration::from_millis(1),
        body: Duration::from_millis(1),
        ..Script::default()
    }
}

/// Runs `objects` over 3 connections pinned to 2 threads and returns, per connection, the
/// threads it was made and served on.
async fn lanes(objects: u64, load: Option<Load>) -> Vec<BTreeSet<Option<usize>>> {
    let clock = Clock::start();
    let t = MockTransport::new(quick(), clock);
    let seen = t.seen.clone();
    let mut p = plan(objects, 3, Some(2), false);
    p.load = load;
    let mut r = Runner::new(Box::new(t), p, clock);
    r.pin(Pinned::start(2, None).unwrap());
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.objects.completed > 0, "{:?}", rep.errors);
    assert_eq!(rep.objects.failed, 0);
    let lanes = seen.lanes.lock().unwrap().clone();
    assert_eq!(lanes.len(), 3);
    lanes
}

/// Each connection stays on one pinned thread, and both threads carry some.
fn assert_pinned(lanes: &[BTreeSet<Option<usize>>]) {
    let on: BTreeSet<Option<usize>> = lanes
        .iter()
        .map(|l| {
            assert_eq!(l.len(), 1, "a connection moved between threads: {lanes:?}");
            *l.first().unwrap()
        })
        .collect();
    assert_eq!(on, BTreeSet::from([Some(0), Some(1)]), "{lanes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loops_connections_each_run_on_one_pinned_thread() {
    assert_pinned(&lanes(30, None).await);
}

/// 400/s for 150 ms: each thread paces its own connections' requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loops_requests_run_on_their_connections_thread() {
    let load = Load {
        duration: Duration::from_millis(150),
        warmup: Duration::ZERO,
        rate: Some(400.0),
        arrivals: Arrivals::Constant,
        max_inflight: 1000,
    };
    assert_pinned(&lanes(4, Some(load)).await);
}
