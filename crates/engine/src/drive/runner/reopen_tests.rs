//! A server's request limit on the mock transport: requests it refused unprocessed go again
//! on a new connection (a stream it turned away alone, on the same one), the report counts
//! what was reopened and retried, and a server that refuses everything, or stops accepting
//! connections, ends the requests instead of looping.

use std::sync::atomic::Ordering;

use qbench_core::ErrorKind;

use super::tests::{plan, runner};
use crate::transport::mock::Script;
use crate::transport::reopen::MAX_RETRIES;

fn ms(v: u64) -> u64 {
    v * 1000
}

#[tokio::test(start_paused = true)]
async fn requests_a_server_refused_go_again_on_a_new_connection() {
    let script = Script {
        request_limit: Some(5),
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(20, 1, Some(4), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!((rep.objects.completed, rep.objects.failed), (20, 0));
    assert_eq!(rep.payload_bytes, (1..=20).sum::<u64>());
    // Five requests per connection: four connections, three of them opened in place of one
    // the server closed; every refused request went again, each counted once.
    assert_eq!(seen.connects.load(Ordering::SeqCst), 4);
    let per_conn: Vec<usize> = seen.requests.lock().unwrap().iter().map(Vec::len).collect();
    assert_eq!(per_conn, [5, 5, 5, 5]);
    assert_eq!(rep.connections.len(), 4);
    let reopened: Vec<bool> = rep.connections.iter().map(|c| c.reopened).collect();
    assert_eq!(reopened, [false, true, true, true]);
    assert!(rep
        .connections
        .iter()
        .all(|c| c.error.is_none() && c.handshake_us == Some(ms(10))));
    assert_eq!(
        rep.objects.retried,
        seen.refused.load(Ordering::SeqCst) as u64
    );
    assert!(rep.objects.retried >= 3, "{}", rep.objects.retried);
    assert!(rep.errors.is_empty());
    // A retried request's time runs from its first sending: the refusal, the new
    // handshake (10 ms) and the fetch (25 ms).
    let max = rep.object_latency.summary.max_us.unwrap();
    assert!(max >= ms(35), "{max}");
}

#[tokio::test(start_paused = true)]
async fn a_server_that_processes_nothing_ends_each_request_after_the_retries() {
    let script = Script {
        request_limit: Some(0),
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(3, 1, Some(1), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(!rep.complete);
    assert_eq!((rep.objects.completed, rep.objects.failed), (0, 3));
    let retries = MAX_RETRIES as usize;
    assert_eq!(seen.connects.load(Ordering::SeqCst), 1 + 3 * retries);
    assert_eq!(seen.refused.load(Ordering::SeqCst), 3 * (retries + 1));
    assert_eq!(rep.objects.retried, 3 * MAX_RETRIES as u64);
    let first = rep.first_error.unwrap();
    assert!(
        first.contains(&format!(
            "did not process this request in {} attempts",
            MAX_RETRIES + 1
        )),
        "{first}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reopen_that_fails_fails_the_waiting_requests_once() {
    let script = Script {
        request_limit: Some(2),
        connect_limit: Some(1),
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(6, 1, Some(1), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(!rep.complete);
    assert_eq!((rep.objects.completed, rep.objects.failed), (2, 4));
    // A run of fixed objects: one attempt to reopen, and the requests after it within a
    // second fail with it at once (a held load's wait for the next attempt is in
    // `transport/reopen/paced_tests.rs`).
    assert_eq!(seen.connects.load(Ordering::SeqCst), 1);
    assert_eq!(rep.connections.len(), 2);
    let failed = &rep.connections[1];
    assert!(failed.reopened && failed.error == Some(ErrorKind::Refused));
    assert_eq!(rep.objects.retried, 0);
    // The connection and the four requests, by the reopen's kind.
    assert_eq!(rep.errors.0.get(&ErrorKind::Refused), Some(&5));
    let first = rep.first_error.unwrap();
    assert!(first.contains("mock peer refuses"), "{first}");
}

#[tokio::test(start_paused = true)]
async fn reused_connections_carry_their_replacements_into_the_next_run() {
    let script = Script {
        request_limit: Some(3),
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(4, 1, Some(1), true));
    let first = r.run(0, &crate::observe::unobserved()).await;
    assert!(first.complete, "{:?}", first.first_error);
    assert_eq!(first.objects.retried, 1);
    let second = r.run(1, &crate::observe::unobserved()).await;
    assert!(second.complete, "{:?}", second.first_error);
    // The replacement served one request in run 0; run 1's fourth request needs another.
    assert_eq!(seen.connects.load(Ordering::SeqCst), 3);
    assert_eq!(second.objects.retried, 1);
    assert_eq!(second.connections.len(), 2);
    assert!(second.connections[1].reopened);
    r.finish().await;
    assert_eq!(seen.closes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn streams_a_server_turned_away_go_again_on_the_same_connection() {
    let script = Script {
        refused_streams: 3,
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(20, 1, Some(4), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!((rep.objects.completed, rep.objects.failed), (20, 0));
    assert_eq!(seen.connects.load(Ordering::SeqCst), 1);
    assert_eq!(rep.objects.retried, 3);
    assert!(rep.connections.iter().all(|c| !c.reopened));

    // A server that turns every stream away: each request ends after the retries, on the
    // one connection.
    let script = Script {
        refused_streams: usize::MAX,
        ..Script::default()
    };
    let (mut r, seen) = runner(script, plan(3, 1, Some(1), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert_eq!((rep.objects.completed, rep.objects.failed), (0, 3));
    assert_eq!(seen.connects.load(Ordering::SeqCst), 1);
    assert_eq!(
        seen.refused.load(Ordering::SeqCst),
        3 * (MAX_RETRIES as usize + 1)
    );
    assert_eq!(rep.objects.retried, 3 * u64::from(MAX_RETRIES));
    let first = rep.first_error.unwrap();
    assert!(
        first.contains("REFUSED_STREAM (the server did not process"),
        "{first}"
    );
}
