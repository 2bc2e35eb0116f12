use super::*;
use crate::spec::link::LinkSpec;

fn spec(s: &str) -> LinkSpec {
    s.parse().unwrap()
}

fn dir(sent: u64, received: u64, reordered: u64, flood: Option<(u64, u64)>) -> DirectionMeasured {
    DirectionMeasured {
        probe_sent: sent,
        probe_received: received,
        reordered,
        flood: flood.map(|(sent_bps, received_bps)| Flood {
            packet_bytes: 1514,
            sent_packets: 1000,
            sent_bps,
            received_packets: 900,
            received_bps,
            trace: None,
            missed_before: Vec::new(),
        }),
    }
}

fn rtt(min: u64, p50: u64) -> RttSummary {
    RttSummary {
        samples: 1000,
        min_us: min,
        p50_us: p50,
        p99_us: p50 + 100,
        max_us: p50 + 200,
    }
}

fn field<'a>(checks: &'a [LinkCheck], f: &str) -> &'a LinkCheck {
    checks.iter().find(|c| c.field == f).unwrap()
}

#[test]
fn a_link_that_does_what_was_asked_passes_every_check() {
    let s = spec("rate=10mbit,rtt=40ms,loss=1%");
    let up = dir(1000, 990, 0, Some((12_000_000, 10_100_000)));
    let down = dir(990, 981, 0, Some((12_000_000, 9_950_000)));
    let checks = judge(&s, &up, &down, &rtt(40_050, 40_200));
    let fields: Vec<&str> = checks.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "rtt",
            "up.loss",
            "up.rate",
            "up.reorder",
            "down.loss",
            "down.rate",
            "down.reorder"
        ]
    );
    assert!(checks.iter().all(|c| c.ok), "{checks:#?}");
}

#[test]
fn a_rate_below_the_tolerance_misses_and_names_its_field() {
    let s = spec("rate=1gbit");
    let up = dir(1000, 1000, 0, Some((1_300_000_000, 940_000_000)));
    let down = dir(1000, 1000, 0, Some((1_300_000_000, 1_020_000_000)));
    let c = judge(&s, &up, &down, &rtt(30, 60));
    assert!(!field(&c, "up.rate").ok);
    assert!(field(&c, "down.rate").ok);
    assert!(field(&c, "up.rate")
        .line()
        .starts_with("link field `up.rate`: measured 940.00 Mbit/s, asked 1.00 Gbit/s"));
}

#[test]
fn a_sender_that_cannot_offer_the_rate_cannot_confirm_it() {
    let s = spec("rate=40gbit");
    let short = dir(1000, 1000, 0, Some((30_000_000_000, 30_000_000_000)));
    let c = judge(&s, &short, &short, &rtt(30, 60));
    let up = field(&c, "up.rate");
    assert!(!up.ok);
    assert!(up.note.as_deref().unwrap().contains("cannot fill the link"));
    assert!(!up.unmeasurable);
}

/// At 1 Gbit/s a probe that offers the rate and no more gets it all through: the rate is not
/// missed (nothing says the link is slower) nor confirmed (nothing says it is not faster).
#[test]
fn a_sender_that_offers_just_the_rate_leaves_it_unmeasured_not_missed() {
    let s = spec("rate=1gbit");
    let d = dir(1000, 1000, 0, Some((1_004_000_000, 1_001_000_000)));
    let c = judge(&s, &d, &d, &rtt(30, 60));
    let down = field(&c, "down.rate");
    assert!(!down.ok && down.unmeasurable, "{down:?}");
    assert!(down
        .note
        .as_deref()
        .unwrap()
        .contains("carried all the probe could offer"));
    assert!(c
        .iter()
        .all(|k| !k.field.ends_with(".rate") || k.unmeasurable));
    // An earlier flood that offered more than the rate and got more through: that miss
    // stands.
    let mut after_miss = d.clone();
    if let Some(f) = after_miss.flood.as_mut() {
        f.missed_before.push(FloodAttempt {
            sent_bps: 1_500_000_000,
            received_bps: 1_300_000_000,
        });
    }
    let c = judge(&s, &after_miss, &after_miss, &rtt(30, 60));
    let down = field(&c, "down.rate");
    assert!(!down.ok && !down.unmeasurable, "{down:?}");
}

#[test]
fn delay_is_judged_by_its_median_and_never_below_the_request() {
    let s = spec("rtt=20ms");
    let d = dir(1000, 1000, 0, None);
    assert!(field(&judge(&s, &d, &d, &rtt(20_010, 20_400)), "rtt").ok);
    // 5% of 20 ms is 1 ms: a median 1.2 ms late misses.
    assert!(!field(&judge(&s, &d, &d, &rtt(20_010, 21_200)), "rtt").ok);
    // A round trip well below the delay means some packets skipped it.
    assert!(!field(&judge(&s, &d, &d, &rtt(12_000, 20_100)), "rtt").ok);
    // No delay asked: half a millisecond of the machine's own is allowed.
    let none = spec("rate=10mbit");
    assert!(field(&judge(&none, &d, &d, &rtt(40, 300)), "rtt").ok);
    assert!(!field(&judge(&none, &d, &d, &rtt(40, 900)), "rtt").ok);
    let silent = RttSummary::default();
    assert!(!field(&judge(&none, &d, &d, &silent), "rtt").ok);
}

#[test]
fn jitter_moves_the_expected_median_and_widens_it() {
    // 10 ms each way plus 0..4 ms each way: median 24 ms, tolerance 1.2 + 4 ms.
    let s = spec("rtt=20ms,jitter=4ms");
    let d = dir(1000, 1000, 7, None);
    let c = judge(&s, &d, &d, &rtt(20_100, 24_500));
    assert!(field(&c, "rtt").ok, "{c:#?}");
    assert!(
        !c.iter().any(|c| c.field.ends_with(".reorder")),
        "jitter may reorder"
    );
    assert!(!field(&judge(&s, &d, &d, &rtt(20_100, 29_500)), "rtt").ok);
}

#[test]
fn losses_are_judged_against_the_binomial_interval() {
    let (lo, hi) = loss_interval(1000, 0.01);
    assert!(lo <= 3 && (17..=20).contains(&hi), "{lo}..{hi}");
    assert_eq!(loss_interval(1000, 0.0), (0, 0));
    assert_eq!(loss_interval(0, 0.5), (0, 0));
    assert_eq!(loss_interval(10, 1.0), (10, 10));
    // Small probabilities, where statrs' own inverse CDF panicked (Table 5's 0.05% and 0.02%).
    assert_eq!(loss_interval(1000, 0.0005), (0, 3));
    assert_eq!(loss_interval(1000, 0.0002).0, 0);
    assert_eq!(loss_interval(200, 1e-9), (0, 0));
    let s = spec("loss=1%");
    let ok = dir(1000, 990, 0, None);
    let lossy = dir(1000, 950, 0, None);
    let c = judge(&s, &lossy, &ok, &rtt(30, 60));
    assert!(!field(&c, "up.loss").ok);
    assert!(field(&c, "down.loss").ok);
    // No loss asked: any loss misses.
    let clean = spec("rate=10mbit");
    assert!(
        !field(
            &judge(&clean, &dir(1000, 999, 0, None), &ok, &rtt(30, 60)),
            "up.loss"
        )
        .ok
    );
}

#[test]
fn reordering_misses_only_where_it_was_not_allowed() {
    let s = spec("rtt=20ms,jitter=4ms,up.reorder=off");
    let d = dir(1000, 1000, 3, None);
    let c = judge(&s, &d, &d, &rtt(20_100, 22_000));
    assert!(!field(&c, "up.reorder").ok);
    assert!(c.iter().all(|c| c.field != "down.reorder"));
}

#[test]
fn under_a_varying_rate_the_fastest_round_trip_is_judged() {
    let s = spec("rate=5..15mbit/1s,rtt=20ms");
    let d = dir(1000, 1000, 0, None);
    // Queueing behind a slow step moved the median far up: not a miss.
    assert!(field(&judge(&s, &d, &d, &rtt(20_100, 90_000)), "rtt").ok);
    assert!(!field(&judge(&s, &d, &d, &rtt(25_000, 90_000)), "rtt").ok);
    assert!(!field(&judge(&s, &d, &d, &rtt(15_000, 20_000)), "rtt").ok);
}

#[test]
fn varying_rates_are_not_checked() {
    let s = spec("rate=5..15mbit/1s");
    let d = dir(1000, 1000, 0, None);
    let c = judge(&s, &d, &d, &rtt(30, 60));
    assert!(c.iter().all(|c| !c.field.ends_with(".rate")));
}

#[test]
fn summaries_of_round_trips() {
    assert_eq!(RttSummary::of(vec![]), RttSummary::default());
    let s = RttSummary::of((1..=100).rev().collect());
    assert_eq!(
        (s.samples, s.min_us, s.p50_us, s.p99_us, s.max_us),
        (100, 1, 51, 99, 100)
    );
}

proptest::proptest! {
    #[test]
    fn loss_intervals_hold_the_mean_and_stay_in_range(
        n in 0u64..100_000,
        p in proptest::prop_oneof![0.0f64..=1.0, 0.0f64..0.002],
    ) {
        let (lo, hi) = loss_interval(n, p);
        proptest::prop_assert!(lo <= hi && hi <= n);
        let mean = n as f64 * p;
        proptest::prop_assert!(n == 0 || (lo as f64 <= mean + 1.0 && mean - 1.0 <= hi as f64));
    }
}

/// A delivery trace's direction is judged on what its schedule carried over the span the
/// flood was measured in; a link that delivers more than its trace (as one whose bucket
/// refilled at every change) misses, naming the field, both rates and the trace's mean.
#[test]
fn a_trace_link_is_judged_on_its_delivered_mean() {
    let s = spec("down.rate=mahimahi:/t,up.rate=10mbit");
    let trace = |received_bps: u64| DirectionMeasured {
        probe_sent: 1000,
        probe_received: 1000,
        reordered: 0,
        flood: Some(Flood {
            packet_bytes: 1514,
            sent_packets: 3000,
            sent_bps: 45_000_000,
            received_packets: 2000,
            received_bps,
            trace: Some(TraceSpan {
                mean_bps: 4_000_000,
                expected_bps: 4_300_000,
                span_us: 1_500_000,
            }),
            missed_before: Vec::new(),
        }),
    };
    let up = dir(1000, 1000, 0, Some((12_000_000, 10_000_000)));
    let ok = judge(&s, &up, &trace(4_250_000), &rtt(100, 120));
    let c = field(&ok, "down.rate");
    assert!(c.ok, "{c:#?}");
    assert_eq!(
        c.asked,
        "trace mean 4.00 Mbit/s, 4.30 Mbit/s over the 1.50 s measured"
    );
    let over = judge(&s, &up, &trace(6_400_000), &rtt(100, 120));
    let c = field(&over, "down.rate");
    assert!(!c.ok, "{c:#?}");
    assert!(
        c.line()
            .starts_with("link field `down.rate`: measured 6.40 Mbit/s"),
        "{}",
        c.line()
    );
    // Two packets over a short span are more than 6% of a slow trace: allowed.
    let slow = TraceSpan {
        mean_bps: 170_000,
        expected_bps: 170_000,
        span_us: 1_000_000,
    };
    let mut f = trace(0).flood.unwrap();
    f.received_bps = 150_000;
    assert!(trace_rate_check("down", &f, &slow).ok);
    f.received_bps = 140_000;
    assert!(!trace_rate_check("down", &f, &slow).ok);
    // A trace whose mean is under the rate floor is carried at the floor: however close the
    // flood came to the floored steps, the link carried more than the trace asked.
    let under = TraceSpan {
        mean_bps: 2_000,
        expected_bps: 9_000,
        span_us: 2_000_000,
    };
    f.received_bps = 9_000;
    let c = trace_rate_check("down", &f, &under);
    assert!(!c.ok, "{c:#?}");
    assert!(
        c.note.as_deref().unwrap().contains("below the 8.00 kbit/s"),
        "{c:#?}"
    );
    // Without a span (no flood measured it) a trace is not checked.
    let mut none = trace(0);
    none.flood.as_mut().unwrap().trace = None;
    assert!(judge(&s, &up, &none, &rtt(100, 120))
        .iter()
        .all(|c| c.field != "down.rate"));
}

/// `loss=100%` up: the loss is confirmed, and what no probe can cross to measure (the round
/// trip, the echoes down) is neither confirmed nor missed, but said to be not measurable.
#[test]
fn a_direction_that_drops_everything_leaves_the_rest_unmeasurable_not_missed() {
    let spec: LinkSpec = "rtt=10ms,up.loss=100%".parse().unwrap();
    let up = DirectionMeasured {
        probe_sent: 200,
        probe_received: 0,
        ..DirectionMeasured::default()
    };
    let down = DirectionMeasured::default();
    let checks = judge(&spec, &up, &down, &RttSummary::default());
    let c = Calibration {
        checks,
        ..Calibration::default()
    };
    let by = |f: &str| c.checks.iter().find(|k| k.field == f).unwrap();
    assert!(by("up.loss").ok && !by("up.loss").unmeasurable);
    for f in ["rtt", "down.loss"] {
        assert!(by(f).unmeasurable && !by(f).ok, "{f}");
        assert!(by(f)
            .note
            .as_deref()
            .unwrap()
            .contains("up drops every packet"));
    }
    assert_eq!(c.misses().count(), 0, "{:?}", c.checks);
    // The same measurements on a link that should carry them are misses.
    let lossless: LinkSpec = "rtt=10ms".parse().unwrap();
    let c = judge(&lossless, &up, &down, &RttSummary::default());
    assert!(c.iter().any(|k| !k.ok && !k.unmeasurable));
}

#[test]
fn a_rate_measured_again_says_what_the_earlier_floods_delivered() {
    let s = spec("rate=20mbit");
    let mut down = dir(1000, 1000, 0, Some((25_000_000, 19_900_000)));
    let f = down.flood.as_mut().unwrap();
    f.missed_before = vec![FloodAttempt {
        sent_bps: 25_000_000,
        received_bps: 18_701_176,
    }];
    let up = dir(1000, 1000, 0, Some((25_000_000, 20_000_000)));
    let checks = judge(&s, &up, &down, &rtt(100, 120));
    let c = field(&checks, "down.rate");
    assert!(c.ok, "{c:?}");
    assert_eq!(
        c.note.as_deref(),
        Some("measured again: 1 earlier flood(s) delivered 18.70 Mbit/s")
    );
    assert_eq!(field(&checks, "up.rate").note, None);
    // Missed again, the check stands missed with every flood's figure.
    down.flood.as_mut().unwrap().received_bps = 18_000_000;
    let checks = judge(&s, &up, &down, &rtt(100, 120));
    let c = field(&checks, "down.rate");
    assert!(!c.ok);
    assert_eq!(
        c.note.as_deref(),
        Some("missed in all 2 floods (earlier ones delivered 18.70 Mbit/s)")
    );
    // Only the figures a flood measured are written: none when no flood missed.
    let j = serde_json::to_value(&up.flood).unwrap();
    assert!(j.get("missed_before").is_none(), "{j}");
}
