//! Merging shards: exact histograms, counters and windows; refusals that name the input.

use std::time::Duration;

use rand::{Rng, SeedableRng};

use super::*;
use crate::recorder::{HandshakeInfo, ObjectOutcome, Recorder};
use crate::report::config::RunConfig;
use crate::report::ReportMeta;
use crate::spec::shard::Shard;
use crate::spec::{RunSpec, Target};

fn tool() -> ToolInfo {
    ToolInfo {
        name: "qbench".into(),
        version: "test".into(),
    }
}

pub(crate) fn meta(shard: Option<Shard>, connections: u32) -> ReportMeta {
    ReportMeta {
        tool: tool(),
        started_at: "2026-11-24T10:00:00.000Z".into(),
        command: vec!["qbench".into()],
        config: RunConfig {
            spec: RunSpec {
                shard,
                connections,
                ..RunSpec::default()
            },
            target: Target::InProcess,
            total_objects: 1_000_000,
            insecure: false,
            ca: None,
            connect_to: None,
            sender: None,
        },
        environment: Default::default(),
    }
}

fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

/// Latencies spread over four decades, so the histogram resizes as it goes.
fn latencies(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| 10u64.pow(rng.gen_range(1..5)) + rng.gen_range(0..1000))
        .collect()
}

/// One shard's run: object `k` sent at `k` us, taking `lat[k]`; `started` is its wall clock.
pub(crate) fn run(lat: &[u64], started: u64, fail: usize) -> RunReport {
    let mut r = Recorder::new(0, (lat.len() + fail) as u64, Duration::ZERO);
    let c = r.connection_started(Duration::ZERO);
    r.handshake_done(c, us(5), HandshakeInfo::default());
    for (k, l) in lat.iter().enumerate() {
        let sent = 10 + k as u64;
        r.object(ObjectOutcome {
            intended: None,
            began: None,
            sent: us(sent),
            headers: Some(us(sent + l / 2)),
            done: us(sent + l),
            body_bytes: 1000,
            error: None,
            status: Some(200),
            stream: None,
        });
    }
    for _ in 0..fail {
        r.object(ObjectOutcome {
            intended: None,
            began: None,
            sent: us(10),
            headers: None,
            done: us(20),
            body_bytes: 0,
            error: Some(Box::new((crate::ErrorKind::Reset, "reset".into()))),
            status: None,
            stream: None,
        });
    }
    let end = lat
        .iter()
        .enumerate()
        .map(|(k, l)| 10 + k as u64 + l)
        .max()
        .unwrap_or(0);
    let mut rep = r.finish(us(end + 1));
    rep.started_unix_us = Some(started);
    rep
}

fn shard_report(i: u32, n: u32, lat: &[u64], started: u64) -> (String, Report) {
    let rep = Report::new(
        meta(Some(Shard::new(i, n).unwrap()), 6),
        vec![run(lat, started, 0)],
        1,
        None,
    )
    .unwrap();
    (format!("shard-{i}.json"), rep)
}

#[test]
fn percentiles_equal_one_histogram_of_every_sample() {
    let all = latencies(30_000, 1);
    let n = 3;
    let parts: Vec<Vec<u64>> = (0..n)
        .map(|i| all.iter().skip(i).step_by(n).copied().collect())
        .collect();
    let inputs: Vec<(String, Report)> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| shard_report(i as u32, n as u32, p, 1_000_000 + 250 * i as u64))
        .collect();
    let m = merge(&inputs, tool(), vec!["qbench".into(), "merge".into()]).unwrap();
    let mut one = LatencyHistogram::new();
    for l in &all {
        one.record(us(*l));
    }
    let got = m.runs[0].object_latency.histogram().unwrap();
    assert_eq!(m.runs[0].object_latency.summary, one.summary());
    assert_eq!(m.summary.object_latency.summary, one.summary());
    for q in 0..=10_000 {
        let q = f64::from(q) / 10_000.0;
        assert_eq!(got.quantile_us(q), one.quantile_us(q), "q = {q}");
    }
    assert_eq!(got.len(), 30_000);
    let r = &m.runs[0];
    assert_eq!(r.objects.completed, 30_000);
    assert_eq!(r.payload_bytes, 30_000_000);
    assert_eq!(r.connections.len(), 3);
    // Shard 2 started 500 us after shard 0: its connection sits there on the merged line.
    assert_eq!(r.connections[2].started_us, 500);
    assert_eq!(r.started_unix_us, Some(1_000_000));
    assert!(m.complete, "{:?}", m.aborted);
    let info = m.merged.as_ref().unwrap();
    assert_eq!(
        (info.count, info.missing.len(), info.start_spread_us),
        (3, 0, Some(500))
    );
    assert_eq!(m.config.spec.shard, None, "the merged config is the whole");
    // Goodput over the union window: first request of any shard to last byte of any.
    let (f, l) = (r.first_request_us.unwrap(), r.last_byte_us.unwrap());
    assert_eq!(f, 10);
    let want = 30_000_000.0 * 8.0 / ((l - f) as f64 / 1e6);
    assert!((r.goodput_bps.unwrap() - want).abs() < 1e-6);
}

#[test]
fn missing_and_failed_shards_are_named() {
    let lat = latencies(100, 2);
    let inputs = vec![shard_report(0, 3, &lat, 0), shard_report(2, 3, &lat, 0)];
    let m = merge(&inputs, tool(), vec![]).unwrap();
    assert!(!m.complete);
    assert_eq!(m.merged.as_ref().unwrap().missing, vec![1]);
    assert!(m.aborted.as_deref().unwrap().contains("shard(s) 1 missing"));
    assert!(!m.runs[0].complete);

    let mut failed = shard_report(1, 3, &lat, 0);
    failed.1 = Report::new(
        meta(Some(Shard::new(1, 3).unwrap()), 6),
        vec![run(&lat, 0, 2)],
        1,
        None,
    )
    .unwrap();
    let all = vec![inputs[0].clone(), failed, inputs[1].clone()];
    let m = merge(&all, tool(), vec![]).unwrap();
    assert!(!m.complete);
    assert_eq!(m.runs[0].objects.failed, 2);
    assert_eq!(m.runs[0].objects.completed, 300);
    assert!(m
        .aborted
        .as_deref()
        .unwrap()
        .contains("shard 1 (shard-1.json)"));
    let entry = &m.merged.as_ref().unwrap().shards[1];
    assert!(!entry.complete && entry.error.as_deref().unwrap().contains("reset"));
    assert!(m.runs[0]
        .first_error
        .as_deref()
        .unwrap()
        .starts_with("shard 1: "));
}

#[test]
fn refusals_name_the_input() {
    let lat = latencies(10, 3);
    let a = shard_report(0, 2, &lat, 0);
    let err =
        |inputs: Vec<(String, Report)>| merge(&inputs, tool(), vec![]).unwrap_err().to_string();
    assert_eq!(err(vec![]), "nothing to merge");
    let dup = err(vec![a.clone(), a.clone()]);
    assert!(dup.contains("both shard 0"), "{dup}");
    let mut other = shard_report(1, 2, &lat, 0);
    other.1.config.spec.timeout = Duration::from_secs(3);
    let e = err(vec![a.clone(), other]);
    assert!(
        e.starts_with("shard-1.json: `timeout_ms` differs from shard-0.json's"),
        "{e}"
    );
    let mut count = shard_report(1, 3, &lat, 0);
    count.0 = "three.json".into();
    let e = err(vec![a.clone(), count]);
    assert!(e.contains("three.json: `shard` differs"), "{e}");
    let plain = (
        "plain.json".to_string(),
        Report::new(meta(None, 6), vec![run(&lat, 0, 0)], 1, None).unwrap(),
    );
    assert!(err(vec![a, plain]).starts_with("plain.json: not a shard's report"));
}

#[test]
fn a_damaged_histogram_is_an_error() {
    let lat = latencies(10, 5);
    let mut b = shard_report(1, 2, &lat, 0);
    b.1.runs[0].object_latency.hdr = "HISTFAAA-not-base64".into();
    let e = merge(&[shard_report(0, 2, &lat, 0), b], tool(), vec![]).unwrap_err();
    assert!(matches!(e, MergeError::Input(_)), "{e}");
    assert!(
        e.to_string()
            .starts_with("shard-1.json: `runs[0].object_latency` histogram encoding"),
        "{e}"
    );
}

/// Figures anyone can edit into a shard's report are checked before anything is added, and
/// each refusal names the file and the field.
#[test]
fn lying_shards_are_refused_naming_file_and_field() {
    let lat = latencies(10, 6);
    let ok = || shard_report(0, 2, &lat, 1_700_000_000_000_000);
    let other = || shard_report(1, 2, &lat, 1_700_000_000_000_000);
    let refuse = |b: (String, Report), says: &str| {
        let e = merge(&[ok(), b], tool(), vec![]).unwrap_err().to_string();
        assert!(e.starts_with("shard-1.json: `"), "{e}");
        assert!(e.contains(says), "{e}");
    };
    // Sums that would wrap.
    let mut b = other();
    b.1.runs[0].payload_bytes = u64::MAX;
    refuse(
        b,
        "`runs[0].payload_bytes` makes the shards' sum exceed 2^64 - 1",
    );
    let mut b = other();
    b.1.runs[0].objects.requested = u64::MAX;
    b.1.runs[0].objects.completed = u64::MAX;
    refuse(
        b,
        "`runs[0].objects.requested` makes the shards' sum exceed",
    );
    // Shard 5 of 2.
    let mut b = other();
    b.1.config.spec.shard = Some(Shard { index: 5, count: 2 });
    refuse(b, "`config.shard.index` is 5 of 2");
    // More completed than requested, and more requested than the workload has.
    let mut b = other();
    b.1.runs[0].objects.completed = 999;
    refuse(b, "`runs[0].objects` says 999 completed");
    let mut b = other();
    b.1.config.total_objects = 15;
    let mut a = ok();
    a.1.config.total_objects = 15;
    let e = merge(&[a, b], tool(), vec![]).unwrap_err().to_string();
    assert!(e.contains("more than the workload's 15 objects"), "{e}");
    // A wall-clock start 584,000 years away.
    let mut b = other();
    b.1.runs[0].started_unix_us = Some(u64::MAX);
    refuse(b, "`runs[0].started_unix_us` is ");
    let mut b = other();
    b.1.runs[0].last_byte_us = Some(u64::MAX);
    refuse(
        b,
        "`runs[0].last_byte_us` is 18446744073709551615 us, more than a run can last",
    );
    // A small histogram that claims a huge payload.
    let mut b = other();
    let mut claim = Vec::new();
    claim.extend(0x1c84_9313u32.to_be_bytes());
    claim.extend(400_000_000u32.to_be_bytes());
    claim.extend([0u8; 36]);
    b.1.runs[0].ttfb.hdr =
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, claim);
    refuse(b, "`runs[0].ttfb` histogram encoding is not a valid V2 histogram: a payload of 400000000 bytes");
}

proptest::proptest! {
    /// A report cut anywhere and followed by anything reads as a report or an error, and
    /// what reads merges or is refused: never a panic.
    #[test]
    fn damaged_reports_never_panic(
        cut in 0usize..6000,
        tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    ) {
        let (_, r) = shard_report(0, 2, &latencies(20, 4), 0);
        let text = serde_json::to_string(&r).unwrap();
        let mut bytes = text.as_bytes()[..cut.min(text.len())].to_vec();
        bytes.extend(tail);
        if let Ok(s) = std::str::from_utf8(&bytes) {
            if let Ok(rep) = Report::from_json(s) {
                let _ = merge(&[("x.json".into(), rep)], tool(), vec![]);
            }
        }
    }
}

#[test]
fn digests_add_up_and_a_clash_is_a_failure() {
    let lat = latencies(10, 6);
    let with = |i: u32, digest: &str| {
        let mut s = shard_report(i, 2, &lat, 0);
        s.1.runs[0].digests = Some([("https://x/a".to_string(), digest.to_string())].into());
        s
    };
    let m = merge(&[with(0, "aa"), with(1, "aa")], tool(), vec![]).unwrap();
    assert!(m.complete);
    assert_eq!(m.runs[0].digests.as_ref().unwrap()["https://x/a"], "aa");
    let m = merge(&[with(0, "aa"), with(1, "bb")], tool(), vec![]).unwrap();
    assert!(!m.complete && !m.runs[0].complete);
    let e = m.runs[0].first_error.as_deref().unwrap();
    assert!(e.contains("shard 1: https://x/a had another body"), "{e}");
}

/// The shards' kernel counters add up field by field, where TCP lost and where interfaces
/// dropped too; one a shard could not read is absent from the sum.
#[test]
fn net_counters_add_up_over_the_shards() {
    use crate::report::net_counters::{NetCounters, NetScope, RunNetCounters, TcpExtCounters};
    let lat = latencies(10, 7);
    let with = |i: u32, c: NetCounters| {
        let mut s = shard_report(i, 2, &lat, 0);
        s.1.runs[0].net = Some(RunNetCounters {
            scope: NetScope::Namespaces,
            client: c,
            server: Some(c),
            client_udp_rcvbuf: None,
            server_udp_rcvbuf: None,
            client_udp_sndbuf: None,
            server_udp_sndbuf: None,
        });
        s
    };
    let c = |n: u64| NetCounters {
        udp_rcvbuf_errors: n,
        tcp_ext: Some(TcpExtCounters {
            tcp_timeouts: n,
            tcp_backlog_drop: 2 * n,
            ..TcpExtCounters::default()
        }),
        nic_rx_dropped: Some(3 * n),
        nic_tx_dropped: Some(0),
        ..NetCounters::default()
    };
    let m = merge(&[with(0, c(1)), with(1, c(10))], tool(), vec![]).unwrap();
    let net = m.runs[0].net.unwrap();
    for side in [net.client, net.server.unwrap()] {
        assert_eq!(side.udp_rcvbuf_errors, 11);
        let ext = side.tcp_ext.unwrap();
        assert_eq!((ext.tcp_timeouts, ext.tcp_backlog_drop), (11, 22));
        assert_eq!(
            (side.nic_rx_dropped, side.nic_tx_dropped),
            (Some(33), Some(0))
        );
    }
    let unread = NetCounters {
        tcp_ext: None,
        nic_rx_dropped: None,
        ..c(10)
    };
    let m = merge(&[with(0, c(1)), with(1, unread)], tool(), vec![]).unwrap();
    let client = m.runs[0].net.unwrap().client;
    assert_eq!((client.tcp_ext, client.nic_rx_dropped), (None, None));
    assert_eq!(
        (client.udp_rcvbuf_errors, client.nic_tx_dropped),
        (11, Some(0))
    );
}

/// Shard `i` of 2 with an open loop's one request: due at 0, taken up at 1 us, sent at 2.
fn held_shard(i: u32) -> (String, Report) {
    let mut s = shard_report(i, 2, &latencies(10, 7), 0);
    let mut r = Recorder::new(0, 1, Duration::ZERO);
    r.hold(Duration::MAX, us(1000), Some(1000.0));
    r.measure_from(Duration::ZERO);
    r.object(ObjectOutcome {
        intended: Some(us(0)),
        began: Some(us(1)),
        sent: us(2),
        headers: Some(us(3)),
        done: us(4),
        body_bytes: 1000,
        error: None,
        status: Some(200),
        stream: None,
    });
    s.1.runs[0].load = r.finish(us(5)).load;
    s
}

/// A shard from before the start lag was split (no client lag) merged with one after: the
/// merged client lag would cover some shards' requests and pass for all of them, so the merge
/// has none.
#[test]
fn a_client_lag_missing_from_a_shard_is_missing_from_the_merge() {
    let m = merge(&[held_shard(0), held_shard(1)], tool(), vec![]).unwrap();
    let l = m.runs[0].load.as_ref().unwrap();
    assert_eq!(l.client_lag.as_ref().unwrap().summary.count, 2);
    let mut old = held_shard(0);
    old.1.runs[0].load.as_mut().unwrap().client_lag = None;
    let m = merge(&[old, held_shard(1)], tool(), vec![]).unwrap();
    let l = m.runs[0].load.as_ref().unwrap();
    assert_eq!(l.lag.as_ref().unwrap().summary.count, 2);
    assert_eq!((l.client_lag.is_none(), l.client_late), (true, 0));
}

/// The client's late requests are some of the late ones: a shard that says more is refused,
/// naming the file and the field.
#[test]
fn a_shard_with_more_client_late_than_late_is_refused() {
    let mut b = held_shard(1);
    let load = b.1.runs[0].load.as_mut().unwrap();
    load.client_late = load.late + 1;
    let e = merge(&[held_shard(0), b], tool(), vec![])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "shard-1.json: `runs[0].load.client_late` is more than `late`"
    );
}
