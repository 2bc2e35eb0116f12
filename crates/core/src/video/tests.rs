use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn mbit(v: f64) -> Rate {
    Rate((v * 1e6) as u64)
}

fn spec(bitrates: &[f64], segment: u64, length: u64) -> VideoSpec {
    let mut s = VideoSpec::new(bitrates.iter().map(|b| mbit(*b)).collect());
    s.segment = ms(segment);
    s.length = ms(length);
    s
}

/// Plays `spec` with each segment taking the given time to download, requested as soon as
/// the player asks; returns the report and the request times (ms from the start).
fn play(spec: VideoSpec, took: &[u64]) -> (VideoReport, Vec<u64>) {
    let mut p = Player::new(spec, ms(1000));
    let mut now = ms(1000);
    let mut asked = Vec::new();
    let mut took = took.iter();
    loop {
        match p.next(now) {
            Next::Fetch { .. } => {
                asked.push((now - ms(1000)).as_millis() as u64);
                now += ms(*took.next().expect("a download time per segment"));
                p.downloaded(now);
            }
            Next::Wait(at) => {
                assert!(at > now, "a wait moves time forward");
                now = at;
            }
            Next::Done => break,
        }
    }
    (p.finish(now), asked)
}

#[test]
fn ladders_parse_with_one_unit_at_the_end() {
    let r = parse_bitrates("0.3,1,2.5,5,20mbit").unwrap();
    assert_eq!(r, [mbit(0.3), mbit(1.0), mbit(2.5), mbit(5.0), mbit(20.0)]);
    assert_eq!(
        parse_bitrates("300kbit, 1mbit").unwrap(),
        [mbit(0.3), mbit(1.0)]
    );
    assert_eq!(parse_bitrates("5mbit").unwrap(), [mbit(5.0)]);
}

#[test]
fn bad_ladders_say_what_is_wrong() {
    let e = |s: &str| parse_bitrates(s).unwrap_err().to_string();
    assert_eq!(e(""), "empty bitrate list");
    assert!(e("5,1mbit").contains("lowest first"), "{}", e("5,1mbit"));
    assert!(e("1,1mbit").contains("without repeats"));
    assert!(e("1,2").contains("no unit"));
    assert!(e("1,,2mbit").contains("stray comma"));
    assert!(e("0,1mbit").contains("above zero"));
    assert!(e("1,2furlong").contains("`2furlong`"));
    let many = vec!["1"; MAX_BITRATES + 1].join(",") + "mbit";
    assert_eq!(e(&many), format!("more than {MAX_BITRATES} bitrates"));
}

#[test]
fn shapes_are_checked() {
    let err = |s: VideoSpec| s.check().unwrap_err().to_string();
    assert!(spec(&[1.0], 2000, 60_000).check().is_ok());
    assert_eq!(
        err(spec(&[1.0], 4000, 2000)),
        "segment 4s is longer than the video (2s)"
    );
    assert!(err(spec(&[1.0], 50, 2000)).contains("shorter than 100ms"));
    let mut s = spec(&[1.0], 2000, 60_000);
    s.max_buffer = ms(1000);
    assert!(err(s).contains("max buffer 1s holds less than one segment"));
    let mut s = spec(&[1.0], 2000, 60_000);
    s.start_buffer = ms(40_000);
    assert!(err(s).contains("start buffer 40s is more than the max buffer"));
    let mut s = spec(&[1.0, 2.0], 2000, 60_000);
    s.quality = Quality::Fixed(mbit(3.0));
    assert_eq!(
        err(s),
        "quality 3.00 Mbit/s is not one of the bitrates listed"
    );
    let s = spec(&[1.0], 100, 86_400_000);
    assert!(err(s).contains("more than 100000"));
    assert!(err(spec(&[1.0], 2000, 0)).contains("length must be above zero"));
    let mut s = spec(&[1.0], 2000, 60_000);
    s.watch = Some(Duration::from_secs(10_000_000_000_000_000_000));
    assert_eq!(err(s), "watch is longer than a day");
    assert!(err(spec(&[50_000.0], 2000, 60_000)).contains("10 GB"));
}

#[test]
fn segments_cover_the_video_and_the_last_is_what_is_left() {
    let s = spec(&[8.0], 2000, 5000);
    assert_eq!(s.segments(), 3);
    assert_eq!(s.segment_length(2), ms(1000));
    // 8 Mbit/s for 2 s is 2 MB; the last second is 1 MB.
    assert_eq!(s.segment_bytes(0, mbit(8.0)), 2_000_000);
    assert_eq!(s.segment_bytes(2, mbit(8.0)), 1_000_000);
}

#[test]
fn a_known_trace_gives_known_stalls() {
    // 5 segments of 2 s, playback from 2 s of buffer. Segment 0 lands at 1 s: playback
    // starts. Segment 1 at 2.5 s (4 s buffered, 1.5 s played); segment 2 takes 3.5 s, so
    // the buffer runs dry at 5 s and playback resumes when it lands at 6 s: one stall of 1 s.
    // The last two land at 6.5 s and 7 s (5 s played), and playback ends at 7 + 5 = 12 s.
    let (r, asked) = play(spec(&[1.0], 2000, 10_000), &[1000, 1500, 3500, 500, 500]);
    assert_eq!(asked, [0, 1000, 2500, 6000, 6500]);
    assert_eq!(r.time_to_start_us, Some(1_000_000));
    assert_eq!(r.rebuffers, 1);
    assert_eq!(r.rebuffer_us, 1_000_000);
    assert_eq!(r.played_us, 10_000_000);
    assert_eq!(r.loaded_us, 10_000_000);
    assert_eq!(r.session_us, 12_000_000);
    assert_eq!(r.rebuffer_ratio, Some(0.1));
    assert_eq!(r.rebuffers_per_played_s, Some(0.1));
    assert!(r.complete);
    assert_eq!(r.segments.len(), 5);
    assert_eq!(r.segment_download.summary.count, 5);
    assert_eq!(r.switches, 0);
    assert_eq!(r.mean_bitrate_bps, Some(1e6));
}

#[test]
fn a_segment_landing_as_the_buffer_runs_dry_is_no_stall() {
    // Segment 1 is asked for at 1 s and lands at 3 s, exactly when the 2 s played out.
    let (r, _) = play(spec(&[1.0], 2000, 4000), &[1000, 2000]);
    assert_eq!((r.rebuffers, r.rebuffer_us), (0, 0));
    assert_eq!(r.session_us, 5_000_000);
}

#[test]
fn a_full_buffer_waits_for_room_for_the_next_segment() {
    // At most 6 s buffered: after three fast segments (6 s buffered, 0.2 s played at 0.3 s),
    // the fourth waits until only 4 s are left, at 2.1 s; later ones every 2 s.
    let mut s = spec(&[1.0], 2000, 12_000);
    s.max_buffer = ms(6000);
    let (r, asked) = play(s, &[100; 6]);
    assert_eq!(asked, [0, 100, 200, 2100, 4100, 6100]);
    assert_eq!(r.rebuffers, 0);
    assert_eq!(r.time_to_start_us, Some(100_000));
    // Playback started at 0.1 s and never stalled: 12 s of video end at 12.1 s.
    assert_eq!(r.session_us, 12_100_000);
}

#[test]
fn playback_waits_for_the_start_buffer_or_the_whole_video() {
    let mut s = spec(&[1.0], 1000, 3000);
    s.start_buffer = ms(2000);
    let (r, _) = play(s.clone(), &[500, 500, 500]);
    assert_eq!(r.time_to_start_us, Some(1_000_000));
    // A start buffer longer than the video: playback starts once all of it is in.
    s.length = ms(1500);
    s.start_buffer = ms(2000);
    s.max_buffer = ms(3000);
    let (r, _) = play(s, &[500, 500]);
    assert_eq!(r.time_to_start_us, Some(1_000_000));
    assert_eq!(r.played_us, 1_500_000);
}

#[test]
fn abr_follows_the_harmonic_mean_of_recent_throughput() {
    let s = spec(&[0.3, 1.0, 2.5, 5.0, 20.0], 2000, 60_000);
    assert_eq!(
        s.choose(&[]),
        0,
        "the first segment is at the lowest bitrate"
    );
    // 10 Mbit/s with 10% headroom is 9: 5 Mbit/s is the highest that fits.
    assert_eq!(s.choose(&[10e6, 10e6, 10e6]), 3);
    // One slow segment in the window pulls the harmonic mean down: 3/(1/10+1/10+1/1) = 2.5,
    // 2.25 with headroom: 1 Mbit/s.
    assert_eq!(s.choose(&[10e6, 10e6, 1e6]), 1);
    // Only the last three count.
    assert_eq!(s.choose(&[0.1e6, 30e6, 30e6, 30e6]), 4);
    assert_eq!(s.choose(&[0.1e6]), 0);
    let mut fixed = s.clone();
    fixed.quality = Quality::Fixed(mbit(2.5));
    assert_eq!(fixed.choose(&[100e6]), 2);
}

#[test]
fn abr_switches_are_counted_and_the_mean_bitrate_weighted() {
    // 2 s at 0.3 Mbit/s is 75 KB; in 100 ms that is 6 Mbit/s measured, which allows
    // 5 Mbit/s. 1.25 MB in 100 ms is 100 Mbit/s, but the harmonic mean of 6 and 100 is 11.3,
    // 10.2 with headroom: 5 Mbit/s again.
    let (r, _) = play(
        spec(&[0.3, 1.0, 2.5, 5.0, 20.0], 2000, 6000),
        &[100, 100, 100],
    );
    let rates: Vec<u64> = r.segments.iter().map(|s| s.bitrate_bps).collect();
    assert_eq!(rates, [300_000, 5_000_000, 5_000_000]);
    assert_eq!(r.switches, 1);
    let mean = r.mean_bitrate_bps.unwrap();
    assert!((mean - 10.3e6 / 3.0).abs() < 1.0, "{mean}");
}

#[test]
fn the_watch_time_ends_the_session_and_counts_an_unfinished_stall() {
    // 1 s segments of a 100 s video watched for 3 s; segment 1 never lands in time.
    let mut s = spec(&[1.0], 1000, 100_000);
    s.start_buffer = ms(1000);
    s.watch = Some(ms(3000));
    let mut p = Player::new(s, ms(0));
    assert!(matches!(p.next(ms(0)), Next::Fetch { index: 0, .. }));
    p.downloaded(ms(500));
    assert!(matches!(p.next(ms(500)), Next::Fetch { index: 1, .. }));
    // The runner gives up on segment 1 at the watch time.
    assert_eq!(p.next(ms(3000)), Next::Done);
    let r = p.finish(ms(3000));
    assert_eq!(r.time_to_start_us, Some(500_000));
    assert_eq!(r.played_us, 1_000_000);
    assert_eq!((r.rebuffers, r.rebuffer_us), (1, 1_500_000));
    assert_eq!(r.loaded_us, 1_000_000);
    assert!((r.loaded_fraction - 0.01).abs() < 1e-9);
    assert_eq!(r.session_us, 3_000_000);
    assert!(
        r.complete,
        "the watch time ending a session is not a failure"
    );
}

#[test]
fn a_watch_time_longer_than_the_download_plays_on_to_its_end() {
    // Ten 2 s segments land in 100 ms each; a 60 s watch of a 20 s video plays all of it,
    // and a 10 s watch plays 10 s.
    let mut s = spec(&[1.0], 2000, 20_000);
    s.watch = Some(ms(60_000));
    let (r, _) = play(s.clone(), &[100; 10]);
    assert_eq!((r.played_us, r.session_us), (20_000_000, 20_100_000));
    s.watch = Some(ms(10_000));
    let (r, _) = play(s, &[100; 10]);
    assert_eq!((r.played_us, r.session_us), (9_900_000, 10_000_000));
    assert_eq!(r.rebuffer_us, 0);
}

#[test]
fn a_failed_segment_ends_an_incomplete_session() {
    let mut p = Player::new(spec(&[1.0], 1000, 10_000), ms(0));
    assert!(matches!(p.next(ms(0)), Next::Fetch { .. }));
    p.failed(ms(200));
    assert_eq!(p.next(ms(200)), Next::Done);
    let r = p.finish(ms(200));
    assert!(!r.complete);
    assert_eq!(r.time_to_start_us, None);
    assert_eq!(r.rebuffer_ratio, None);
}

proptest::proptest! {
    #[test]
    fn ladder_parser_never_panics(s in "\\PC{0,40}") {
        let _ = parse_bitrates(&s);
    }

    #[test]
    fn quality_parser_never_panics(s in "\\PC{0,20}") {
        let _ = s.parse::<Quality>();
    }

    /// Whatever the download times, the figures add up: video played never exceeds video
    /// loaded, which never exceeds the video, and a finished session played it all.
    #[test]
    fn any_trace_keeps_the_books_straight(
        took in proptest::collection::vec(0u64..5000, 1..40),
        seg in 100u64..4000,
        segs in 1u64..30,
        start in 0u64..8000,
        max_extra in 0u64..20_000,
    ) {
        let mut s = spec(&[0.5, 2.0, 8.0], seg, seg * segs);
        s.start_buffer = ms(start.min(seg + max_extra));
        s.max_buffer = ms(seg + max_extra);
        proptest::prop_assume!(s.check().is_ok());
        let n = s.segments() as usize;
        let mut took = took;
        took.resize(n, 1);
        let (r, asked) = play(s.clone(), &took);
        proptest::prop_assert_eq!(asked.len(), n);
        proptest::prop_assert!(r.played_us <= r.loaded_us);
        proptest::prop_assert_eq!(r.loaded_us, (seg * segs) * 1000);
        proptest::prop_assert_eq!(r.played_us, r.loaded_us);
        proptest::prop_assert!(r.complete);
        let start = r.time_to_start_us.unwrap();
        // The session is its start, the video and the stalls.
        proptest::prop_assert_eq!(r.session_us, start + r.played_us + r.rebuffer_us);
        proptest::prop_assert!(asked.windows(2).all(|w| w[0] <= w[1]));
    }
}
