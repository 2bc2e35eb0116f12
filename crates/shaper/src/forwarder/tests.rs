//! Unit tests of the scheduling logic; they run anywhere. The end-to-end tests, which need
//! root, are in `tests_e2e`.

use super::*;

pub(super) fn imp(delay_ms: u64, jitter_ms: u64, reorder: bool, loss: f64) -> Impairment {
    Impairment {
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::from_millis(jitter_ms),
        reorder,
        loss,
    }
}

#[test]
fn fifo_due_times_never_decrease_under_jitter() {
    let mut s = Scheduler::new(imp(5, 20, false, 0.0), 1);
    let t0 = Instant::now();
    let mut last = t0;
    for i in 0..10_000u64 {
        let arrival = t0 + Duration::from_micros(i * 10);
        let slot = s.admit(arrival).expect("no loss configured");
        assert!(slot.due >= last, "packet {i} would overtake");
        assert!(slot.due >= arrival + Duration::from_millis(5));
        assert!(!slot.overtakes);
        last = slot.due;
    }
}

#[test]
fn jitter_stays_within_bounds_and_reorders_when_allowed() {
    let mut s = Scheduler::new(imp(5, 20, true, 0.0), 2);
    let t0 = Instant::now();
    let (mut overtakes, mut max_extra) = (0, Duration::ZERO);
    for i in 0..10_000u64 {
        let arrival = t0 + Duration::from_micros(i * 10);
        let slot = s.admit(arrival).expect("no loss configured");
        let extra = slot.due - arrival - Duration::from_millis(5);
        assert!(extra <= Duration::from_millis(20));
        max_extra = max_extra.max(extra);
        overtakes += u32::from(slot.overtakes);
    }
    assert!(overtakes > 1000, "only {overtakes} overtakes");
    assert!(
        max_extra > Duration::from_millis(19),
        "jitter never reached its range"
    );
}

#[test]
fn loss_fraction_matches_probability() {
    for p in [0.0, 0.01, 0.5, 1.0] {
        let mut s = Scheduler::new(imp(0, 0, false, p), 3);
        let now = Instant::now();
        let n = 100_000;
        let lost = (0..n).filter(|_| s.admit(now).is_none()).count() as f64;
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (lost - n as f64 * p).abs() <= 5.0 * sigma + 0.5,
            "p={p}: lost {lost} of {n}"
        );
    }
}

#[test]
fn heap_pops_earliest_first_and_fifo_in_arrival_order() {
    let t0 = Instant::now();
    let pkt = |ms: u64, seq: u64| Packet {
        buf: vec![0; SMALL_BUF],
        len: 1,
        segs: 1,
        due: t0 + Duration::from_millis(ms),
        seq,
        overtakes: false,
    };
    let mut q = Queue::new(true);
    for (i, ms) in [30, 10, 20, 10].into_iter().enumerate() {
        q.push(pkt(ms, i as u64));
    }
    let mut out = Vec::new();
    q.pop_due(t0 + Duration::from_millis(25), &mut out, 10);
    let order: Vec<u64> = out.iter().map(|p| p.seq).collect();
    assert_eq!(
        order,
        [1, 3, 2],
        "earliest due first, ties in arrival order"
    );
    assert_eq!(q.len(), 1);
    assert_eq!(q.bytes, SMALL_BUF);
    assert_eq!(q.drain_all().len(), 1);
    assert_eq!(q.bytes, 0);

    let mut q = Queue::new(false);
    q.push(pkt(10, 0));
    q.push(pkt(10, 1));
    q.push(pkt(40, 2));
    out.clear();
    q.pop_due(t0 + Duration::from_millis(10), &mut out, 10);
    assert_eq!(out.iter().map(|p| p.seq).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(q.head_due(), Some(t0 + Duration::from_millis(40)));
}

#[test]
fn wake_skew_learns_and_stays_bounded() {
    let mut w = WakeSkew::new();
    for _ in 0..100 {
        w.observe(Duration::from_micros(10));
    }
    let m = w.margin();
    assert!(
        m >= Duration::from_micros(9) && m <= Duration::from_micros(11),
        "{m:?}"
    );
    for _ in 0..100 {
        w.observe(Duration::from_millis(4));
    }
    assert_eq!(
        w.margin(),
        MAX_SPIN,
        "preemption delays must not grow the spin"
    );
}

#[test]
fn invalid_impairments_are_rejected() {
    assert!(imp(0, 0, false, 1.5).validate().is_err());
    assert!(imp(0, 0, false, -0.1).validate().is_err());
    assert!(imp(0, 0, false, f64::NAN).validate().is_err());
    assert!(Impairment {
        delay: Duration::MAX,
        ..Impairment::default()
    }
    .validate()
    .is_err());
    assert!(imp(100, 50, true, 0.3).validate().is_ok());
}
