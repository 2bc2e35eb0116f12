//! A slot whose server went away: attempts to reopen it are paced, the requests waiting for
//! one share its outcome, and none is made once the run is over.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use qbench_core::ErrorKind;

use super::{Reopening, FAILED_REOPEN_HOLD};
use crate::drive::until::{Stop, Until};
use crate::measure::clock::Clock;
use crate::transport::streams::StreamFacts;
use crate::transport::{
    BoxFuture, Connected, Dog, Exchange, FetchError, ObjectReq, Progress, Sink, Transport,
};

/// A connection the server closed: every request fails before it is sent.
struct Closed;

impl Exchange for Closed {
    async fn request(&self, _: &Uri, _: &mut dyn Sink, _: Dog<'_>) -> Result<(), FetchError> {
        Err(FetchError::new(ErrorKind::Reset, "connection closed").unsent())
    }

    fn streams(&self) -> StreamFacts {
        StreamFacts::default()
    }
}

/// A server that is gone: every handshake is refused at once. Counts them.
struct Gone(AtomicU64);

impl Transport for Gone {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Err(FetchError::new(ErrorKind::Refused, "connection refused")) })
    }
}

fn dead_slot(clock: Clock) -> (Arc<Gone>, Arc<Reopening>) {
    let gone = Arc::new(Gone(AtomicU64::new(0)));
    let slot = Reopening::new(gone.clone(), clock, Arc::new(Closed));
    (gone, Arc::new(slot))
}

fn req() -> ObjectReq {
    ObjectReq {
        uri: "https://h:1/bytes/1".parse().unwrap(),
        expected_len: Some(1),
        verify: false,
    }
}

/// `workers` closed-loop workers on `slot` until `until` is over (or, without one, for
/// `for_how_long`), each at most 10,000 requests; every outcome's error.
async fn closed_loop(
    slot: &Arc<Reopening>,
    workers: usize,
    until: Option<Until>,
    for_how_long: Duration,
) -> Vec<(ErrorKind, String)> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (slot, until) = (slot.clone(), until.clone());
        tasks.spawn(async move {
            let (clock, book) = (slot.clock, crate::transport::verify::DigestBook::default());
            let mut errors = Vec::new();
            let mut held = slot.hold();
            for _ in 0..10_000 {
                let over = match &until {
                    Some(u) => u.over(),
                    None => clock.now() >= for_how_long,
                };
                if over {
                    break;
                }
                let r = req();
                let p = Progress::closed_loop(&clock, &r);
                let out = crate::transport::fetch_held(&slot, &mut held, p, &book, None)
                    .await
                    .expect("no end to drop it at");
                errors.push(*out.error.expect("nothing answers"));
            }
            errors
        });
    }
    let mut all = Vec::new();
    while let Some(errors) = tasks.join_next().await {
        all.extend(errors.unwrap());
    }
    all
}

#[tokio::test(start_paused = true)]
async fn in_a_held_load_a_gone_server_is_tried_once_a_hold_per_slot_at_that_pace() {
    let clock = Clock::paused();
    let (gone, slot) = dead_slot(clock);
    let until = Until::new(Arc::new(Stop::default()), clock);
    slot.serve_until(Some(Arc::new(until)), true);
    // Requests start until 3.5 s; attempts at 0, 1, 2, 3 and 4 s (for those taken up after
    // 3 s), each failing the requests that waited for it.
    let span = FAILED_REOPEN_HOLD * 3 + FAILED_REOPEN_HOLD / 2;
    let errors = closed_loop(&slot, 10, None, span).await;
    let attempts = gone.0.load(Ordering::SeqCst);
    assert_eq!(attempts, 5, "{} requests failed", errors.len());
    assert_eq!(clock.now(), FAILED_REOPEN_HOLD * 4);
    assert!(
        (10..=60).contains(&errors.len()),
        "about 10 requests per attempt, not as fast as refusals return: {}",
        errors.len()
    );
    assert!(errors.iter().all(
        |(k, m)| *k == ErrorKind::Refused && m.contains("a new one failed: connection refused")
    ));
    // Every attempt is in the slot's log, as a failed reopen.
    let reopens = Exchange::reopens(slot.as_ref());
    assert_eq!(reopens.opened.len(), 5);
    assert!(reopens.opened.iter().all(|r| r.outcome.is_err()));
    assert_eq!(reopens.retried, 0);
}

#[tokio::test(start_paused = true)]
async fn no_attempt_is_made_once_the_run_is_over() {
    let clock = Clock::paused();
    let (gone, slot) = dead_slot(clock);
    let until = Until::new(Arc::new(Stop::default()), clock);
    let end = FAILED_REOPEN_HOLD + FAILED_REOPEN_HOLD / 2;
    until.set_end(end);
    slot.serve_until(Some(Arc::new(until.clone())), true);
    let errors = closed_loop(&slot, 4, Some(until), Duration::MAX).await;
    // At 0 and 1 s; the pause after the second is cut at the end, with no third attempt.
    assert_eq!(gone.0.load(Ordering::SeqCst), 2);
    assert_eq!(clock.now(), end, "the run's end cut the pause short");
    let ended = errors
        .iter()
        .filter(|(_, m)| m.contains("the run ended"))
        .count();
    assert!(ended >= 1, "{errors:?}");
    assert!(errors.len() <= 12, "{errors:?}");

    // A stop cuts it short as well, before the end.
    let (gone, slot) = dead_slot(clock);
    let stop = Arc::new(Stop::default());
    let until = Until::new(stop.clone(), clock);
    slot.serve_until(Some(Arc::new(until.clone())), true);
    let stopping = tokio::spawn(async move {
        tokio::time::sleep(FAILED_REOPEN_HOLD / 4).await;
        stop.stop();
    });
    let start = clock.now();
    let errors = closed_loop(&slot, 4, Some(until), Duration::MAX).await;
    stopping.await.unwrap();
    assert_eq!(gone.0.load(Ordering::SeqCst), 1);
    assert_eq!(clock.now() - start, FAILED_REOPEN_HOLD / 4);
    assert!(errors
        .iter()
        .any(|(_, m)| m.contains("the run was stopped")));
}

/// A server that takes the handshake's packets and never answers.
struct Mute;

impl Transport for Mute {
    fn connect(&self) -> BoxFuture<'_, Result<Connected, FetchError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_ends_a_handshake_under_way_and_it_is_not_counted() {
    let clock = Clock::paused();
    let slot = Arc::new(Reopening::new(Arc::new(Mute), clock, Arc::new(Closed)));
    let stop = Arc::new(Stop::default());
    slot.serve_until(Some(Arc::new(Until::new(stop.clone(), clock))), false);
    let stopping = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.stop();
    });
    let r = req();
    let book = crate::transport::verify::DigestBook::default();
    let p = Progress::closed_loop(&clock, &r);
    let out = crate::transport::fetch_held(&slot, &mut slot.hold(), p, &book, None)
        .await
        .expect("no end to drop it at");
    stopping.await.unwrap();
    assert_eq!(clock.now(), Duration::from_millis(100));
    let (kind, message) = *out.error.expect("stopped");
    assert_eq!(kind, ErrorKind::Reset, "the connection's own error");
    assert!(message.contains("the run was stopped before it could go on a new connection"));
    assert!(Exchange::reopens(slot.as_ref()).opened.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_run_of_fixed_objects_fails_them_at_once_while_the_failure_holds() {
    let clock = Clock::paused();
    let (gone, slot) = dead_slot(clock);
    slot.serve_until(Some(Arc::new(Until::new(Arc::default(), clock))), false);
    let book = crate::transport::verify::DigestBook::default();
    let mut held = slot.hold();
    for _ in 0..100 {
        let r = req();
        let p = Progress::closed_loop(&clock, &r);
        let out = crate::transport::fetch_held(&slot, &mut held, p, &book, None)
            .await
            .expect("no end to drop it at");
        assert_eq!(out.error.expect("nothing answers").0, ErrorKind::Refused);
    }
    assert_eq!(gone.0.load(Ordering::SeqCst), 1, "one attempt");
    assert_eq!(clock.now(), Duration::ZERO, "no wait");
}

/// A held load whose end comes at 100 ms while a request never sent waits for a handshake
/// that hangs (its connection died first): the request is dropped at the end, the attempt
/// abandoned and not counted, and nothing counts as sent again. One whose run was already
/// over when its connection failed is dropped without an attempt.
#[tokio::test(start_paused = true)]
async fn a_request_never_sent_is_dropped_at_the_end_not_sent_on_a_new_connection() {
    let clock = Clock::paused();
    let slot = Arc::new(Reopening::new(Arc::new(Mute), clock, Arc::new(Closed)));
    let until = Until::new(Arc::default(), clock);
    until.set_end(Duration::from_millis(100));
    slot.serve_until(Some(Arc::new(until.clone())), true);
    let r = req();
    let book = crate::transport::verify::DigestBook::default();
    let p = Progress::closed_loop(&clock, &r).unsent_until(&until);
    let mut held = slot.hold();
    let fetching = crate::transport::fetch_held(&slot, &mut held, p, &book, None);
    let out = tokio::time::timeout(Duration::from_secs(3600), fetching)
        .await
        .expect("still waiting for the handshake an hour on");
    assert!(out.is_none(), "dropped, not failed: {out:?}");
    assert_eq!(clock.now(), Duration::from_millis(100));
    let reopens = Exchange::reopens(slot.as_ref());
    assert!(reopens.opened.is_empty());
    assert_eq!(reopens.retried, 0);

    let (gone, slot) = dead_slot(clock);
    slot.serve_until(Some(Arc::new(until.clone())), true);
    let p = Progress::closed_loop(&clock, &r).unsent_until(&until);
    let out = crate::transport::fetch_held(&slot, &mut slot.hold(), p, &book, None).await;
    assert!(out.is_none(), "dropped, not failed: {out:?}");
    assert_eq!(gone.0.load(Ordering::SeqCst), 0, "no attempt after the end");
    assert_eq!(clock.now(), Duration::from_millis(100));
}
