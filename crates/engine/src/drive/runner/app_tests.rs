//! Video sessions and page loads against the mock transport on tokio's paused clock: what
//! is requested, on which connection, in which order, and the figures that follow.

use std::sync::Arc;
use std::time::Duration;

use qbench_core::page::{PageObject, PageProfile};
use qbench_core::report::page::PageSpec;
use qbench_core::video::{Quality, VideoSpec};
use qbench_core::wire::bytes_path;
use qbench_core::Rate;

use super::tests::runner;
use super::{App, AppPlan, Plan};
use crate::transport::mock::Script;

fn plan(app: App, h1: bool) -> Plan {
    let mut p = super::tests::plan(0, 1, None, false);
    p.app = Some(AppPlan {
        app,
        base: "https://mock".into(),
        verify: true,
        h1,
    });
    p
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// 1 Mbit/s in 2 s segments of a 10 s video: 250,000 bytes each.
fn video(max_buffer: u64) -> VideoSpec {
    let mut v = VideoSpec::new(vec![Rate(1_000_000)]);
    v.segment = ms(2000);
    v.length = ms(10_000);
    v.start_buffer = ms(2000);
    v.max_buffer = ms(max_buffer);
    v
}

#[tokio::test(start_paused = true)]
async fn a_video_is_fetched_segment_by_segment_at_playback_pace() {
    let (mut r, seen) = runner(Script::default(), plan(App::Video(video(4000)), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!(seen.connects.load(std::sync::atomic::Ordering::SeqCst), 1);
    let paths = seen.requests.lock().unwrap().clone();
    assert_eq!(paths, vec![vec![bytes_path(250_000); 5]]);
    assert_eq!(rep.payload_bytes, 1_250_000);
    assert_eq!((rep.objects.requested, rep.objects.completed), (5, 5));
    let v = rep.video.expect("a video report");
    // 10 ms handshake and 25 ms per segment: playback starts at 35 ms and, never stalled,
    // ends 10 s later. Only the first two segments go at once (4 s of buffer).
    assert_eq!(v.time_to_start_us, Some(35_000));
    assert_eq!((v.rebuffers, v.rebuffer_us), (0, 0));
    assert_eq!(v.session_us, 10_035_000);
    let asked: Vec<u64> = v.segments.iter().map(|s| s.requested_us).collect();
    assert_eq!(asked, [10_000, 35_000, 2_035_000, 4_035_000, 6_035_000]);
    assert_eq!(v.segment_download.summary.count, 5);
}

#[tokio::test(start_paused = true)]
async fn slow_segments_stall_playback_by_a_known_amount() {
    // Each segment takes 3.005 s to arrive and plays for 2 s: after the first, every one
    // of the other four leaves the player stalled for 1.005 s.
    let script = Script {
        body: ms(3000),
        timeout: ms(10_000),
        ..Script::default()
    };
    let (mut r, _) = runner(script, plan(App::Video(video(30_000)), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    let v = rep.video.unwrap();
    assert_eq!(v.time_to_start_us, Some(3_015_000));
    assert_eq!((v.rebuffers, v.rebuffer_us), (4, 4_020_000));
    assert!((v.rebuffer_ratio.unwrap() - 0.402).abs() < 1e-9);
}

#[tokio::test(start_paused = true)]
async fn the_watch_time_ends_a_session_without_failing_it() {
    let mut v = video(4000);
    v.watch = Some(ms(3000));
    v.quality = Quality::Fixed(Rate(1_000_000));
    let (mut r, _) = runner(Script::default(), plan(App::Video(v), false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!((rep.objects.requested, rep.objects.completed), (3, 3));
    let v = rep.video.unwrap();
    assert_eq!(v.loaded_us, 6_000_000);
    assert_eq!(v.played_us, 2_965_000);
    assert_eq!(v.session_us, 3_000_000);
}

fn object(origin: usize, size: u64, parent: Option<usize>, level: u32) -> PageObject {
    PageObject {
        url: format!("https://o{origin}.test/{size}"),
        origin,
        size,
        level,
        parent,
    }
}

fn page(objects: Vec<PageObject>, origins: usize) -> App {
    App::Page(Arc::new(PageSpec {
        name: "t.har".into(),
        profile: PageProfile {
            origins: (0..origins)
                .map(|o| format!("https://o{o}.test:443"))
                .collect(),
            objects,
        },
    }))
}

#[tokio::test(start_paused = true)]
async fn a_page_requests_each_object_once_its_parent_arrived() {
    // A document reveals a style sheet and a script on its origin and an image on another;
    // the style sheet reveals a font on the other origin.
    let p = page(
        vec![
            object(0, 10_000, None, 0),
            object(0, 2_000, Some(0), 1),
            object(1, 30_000, Some(0), 1),
            object(1, 4_000, Some(1), 2),
            object(0, 5_000, Some(0), 1),
        ],
        2,
    );
    let (mut r, seen) = runner(Script::default(), plan(p, false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!(rep.payload_bytes, 51_000);
    assert_eq!(rep.connections.len(), 2);
    let paths = seen.requests.lock().unwrap().clone();
    let want = |sizes: &[u64]| sizes.iter().map(|s| bytes_path(*s)).collect::<Vec<_>>();
    assert_eq!(
        paths,
        vec![want(&[10_000, 2_000, 5_000]), want(&[30_000, 4_000])]
    );
    let pg = rep.page.unwrap();
    assert_eq!((pg.objects, pg.bytes, pg.origins), (5, 51_000, 2));
    assert_eq!(pg.connections, [1, 1]);
    // The document: 10 ms handshake + 25 ms. Level 1 starts at 35 ms; the image waits for
    // its origin's handshake (35-45 ms) and arrives at 70 ms. The font is asked for when the
    // style sheet arrives (60 ms) and arrives at 85 ms, which is the page load time.
    let lv: Vec<_> = pg
        .levels
        .iter()
        .map(|l| (l.objects, l.first_request_us, l.done_us))
        .collect();
    assert_eq!(
        lv,
        [
            (1, Some(10_000), Some(35_000)),
            (3, Some(35_000), Some(70_000)),
            (1, Some(60_000), Some(85_000)),
        ]
    );
    assert_eq!(rep.plt_us, Some(85_000));
}

#[tokio::test(start_paused = true)]
async fn http1_opens_up_to_six_connections_per_origin() {
    let mut objects = vec![object(0, 1_000, None, 0)];
    objects.extend((1..=9).map(|i| object(0, 1_000 + i, Some(0), 1)));
    let (mut r, seen) = runner(Script::default(), plan(page(objects, 1), true));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(rep.complete, "{:?}", rep.first_error);
    assert_eq!(seen.connects.load(std::sync::atomic::Ordering::SeqCst), 6);
    assert!(seen.peak_in_flight.lock().unwrap().iter().all(|p| *p == 1));
    assert_eq!(rep.objects.completed, 10);
    assert_eq!(rep.page.unwrap().connections, [6]);
}

#[tokio::test(start_paused = true)]
async fn a_refused_origin_leaves_its_objects_unsent() {
    let script = Script {
        refuse: Some(qbench_core::ErrorKind::Refused),
        ..Script::default()
    };
    let p = page(vec![object(0, 100, None, 0), object(0, 200, Some(0), 1)], 1);
    let (mut r, _) = runner(script, plan(p, false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert!(!rep.complete);
    assert_eq!((rep.objects.requested, rep.objects.not_started), (2, 2));
    assert_eq!(
        rep.connections.len(),
        crate::drive::page::CONNECT_ATTEMPTS as usize
    );
    let pg = rep.page.unwrap();
    assert!(pg.levels.iter().all(|l| l.done_us.is_none()));
}

#[tokio::test(start_paused = true)]
async fn a_failed_request_retires_its_connection() {
    // The document reveals a response that never comes (it times out at 1 s) and a slow one
    // (2 s) whose child is asked for after the timeout: it goes on a new connection.
    let script = Script {
        stall: [bytes_path(200)].into_iter().collect(),
        slow: vec![(bytes_path(300), ms(2000))],
        ..Script::default()
    };
    let p = page(
        vec![
            object(0, 100, None, 0),
            object(0, 200, Some(0), 1),
            object(0, 300, Some(0), 1),
            object(0, 400, Some(2), 2),
        ],
        1,
    );
    let (mut r, seen) = runner(script, plan(p, false));
    let rep = r.run(0, &crate::observe::unobserved()).await;
    assert_eq!((rep.objects.completed, rep.objects.failed), (3, 1));
    let paths = seen.requests.lock().unwrap().clone();
    let want = |sizes: &[u64]| sizes.iter().map(|s| bytes_path(*s)).collect::<Vec<_>>();
    assert_eq!(paths, vec![want(&[100, 200, 300]), want(&[400])]);
    assert_eq!(rep.page.unwrap().connections, [2]);
}

/// A page of more origins than a browser holds connections: at most `MAX_OPEN` are open at
/// once, idle ones of origins with nothing left to fetch are closed to make room, and every
/// object arrives.
#[tokio::test(start_paused = true)]
async fn a_page_of_many_origins_holds_at_most_max_open_connections() {
    use crate::drive::page::MAX_OPEN;
    use std::sync::atomic::Ordering::SeqCst;
    let n = MAX_OPEN * 2 + 7;
    let mut objects = vec![object(0, 100, None, 0)];
    objects.extend((1..=n).map(|o| object(o, 1000 + o as u64, Some(0), 1)));
    for h1 in [false, true] {
        let (mut r, seen) = runner(Script::default(), plan(page(objects.clone(), n + 1), h1));
        let rep = r.run(0, &crate::observe::unobserved()).await;
        assert!(rep.complete, "{:?}", rep.first_error);
        assert_eq!(rep.objects.completed, n as u64 + 1);
        assert_eq!(seen.connects.load(SeqCst), n + 1);
        assert_eq!(seen.peak_open.load(SeqCst), MAX_OPEN);
        // Each connection past the first MAX_OPEN had one closed before it.
        assert!(
            seen.closes.load(SeqCst) > n - MAX_OPEN,
            "{}",
            seen.closes.load(SeqCst)
        );
        assert_eq!(rep.connections.len(), n + 1);
        assert!(rep.connections.iter().all(|c| c.error.is_none()));
    }
}
