//! The run summary's and the interval lines' text: counts grouped, small rates readable, CPU
//! not scaled from too little, a run with nothing completed kept short, and the interval
//! labels and lengths as they are.

use std::time::Duration;

use qbench_core::report::load::IntervalRecord;
use qbench_core::{ErrorKind, HistogramExport, LatencyHistogram, Protocol, Recorder};

use super::run::{interval_line, summary};
use crate::export::html::scaling_tests::{round, side};

fn line<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no `{key}` line in\n{text}"))
}

#[test]
fn large_counts_are_grouped_and_a_slow_rate_is_not_zero() {
    // One 100 MB object over 5 s: 0.2 objects per second.
    let text = summary(
        &side(Protocol::H3, vec![round(0, 100_000_000, 5.0, Some(2.0))]),
        "h",
    );
    assert_eq!(
        line(&text, "objects "),
        "  objects        1/1 ok, 100,000,000 payload bytes, 1/1 runs complete"
    );
    assert_eq!(line(&text, "objects/s"), "  objects/s      0.20");
}

#[test]
fn cpu_is_scaled_to_a_gb_only_from_enough_of_it() {
    let little = summary(
        &side(Protocol::H3, vec![round(0, 1_000_000, 0.1, Some(0.1))]),
        "h",
    );
    assert_eq!(
        line(&little, "CPU "),
        "  CPU            client 0.100 s; too little CPU to extrapolate per GB (under 0.5 \
         CPU-s): run longer or larger for per-GB figures"
    );
    let report = side(Protocol::H3, vec![round(0, 1_000_000_000, 2.0, Some(2.0))]);
    let enough = summary(&report, "h");
    assert_eq!(
        line(&enough, "CPU "),
        "  CPU            client 2.000 s; 500.0 MB payload per CPU-second; per GB client \
         2.00 s; 4.00 Gbit/s per busy core; client 2000000.0 µs per object"
    );
    // The run's own figure, in its JSON.
    let run = &report.runs[0];
    let per = run.cpu.as_ref().and_then(|c| c.client_us_per_object);
    assert_eq!(per, None, "made without per_object");
    let cpu = run.cpu.clone().unwrap().per_object(4);
    assert_eq!(cpu.client_us_per_object, Some(500_000.0));
    assert_eq!(cpu.per_object(0).client_us_per_object, None);
}

#[test]
fn a_run_without_a_completed_request_is_its_errors_alone() {
    let mut r = Recorder::new(0, 200, Duration::ZERO);
    let c = r.connection_started(Duration::ZERO);
    r.connection_failed(c, ErrorKind::Timeout, "QUIC handshake: no progress for 2s");
    let mut run = r.finish(Duration::from_secs(2));
    run.client = None;
    let text = summary(&side(Protocol::H3, vec![run]), "qbench h3 -> 127.0.0.1:9");
    assert_eq!(
        text,
        "qbench h3 -> 127.0.0.1:9\n  objects        0/200 ok, 0 payload bytes, 0/1 runs complete\n  \
         errors         timeout=1\n"
    );
}

/// Connections opened in place of closed ones, and attempts that failed, are counted apart,
/// and said even when nothing completed: they are why.
#[test]
fn reopens_are_said_with_their_failed_attempts_apart() {
    let mut r = Recorder::new(0, 3, Duration::ZERO);
    let first = r.connection_started(Duration::ZERO);
    r.handshake_done(first, Duration::from_millis(2), Default::default());
    let opened = r.connection_reopened(Duration::from_millis(5));
    r.handshake_done(opened, Duration::from_millis(7), Default::default());
    for at in [1, 2] {
        let failed = r.connection_reopened(Duration::from_secs(at));
        r.connection_failed(failed, ErrorKind::Refused, "connection refused");
    }
    r.retried(1);
    let mut run = r.finish(Duration::from_secs(3));
    run.client = None;
    let text = summary(&side(Protocol::H2, vec![run]), "h");
    assert_eq!(
        line(&text, "reopened"),
        "  reopened       1 connection(s) opened in place of closed ones (the server's request \
         limit, a reset, silence past an idle timeout or --timeout), 2 attempt(s) to open one failed (at most one a \
         second per connection); 1 request(s) the server had not processed sent again"
    );
}

fn interval(start_ms: u64, end_ms: u64, completed: u64, warmup: bool) -> IntervalRecord {
    let mut h = LatencyHistogram::new();
    for _ in 0..completed {
        h.record(Duration::from_millis(2));
    }
    IntervalRecord {
        start_us: start_ms * 1000,
        end_us: end_ms * 1000,
        warmup,
        completed,
        failed: 0,
        dropped: 0,
        payload_bytes: completed * 5000,
        in_flight: 3,
        errors: Default::default(),
        latency: HistogramExport::from(&h),
        ttfb: None,
        start_lag: None,
    }
}

#[test]
fn an_interval_is_labelled_warm_up_only_when_its_record_says_so() {
    let s = Duration::from_secs(1);
    let counted = interval_line(0, &interval(0, 1000, 12_000, false), s);
    assert!(counted.contains("12,000 req/s"), "{counted}");
    assert!(!counted.contains("warm-up"), "{counted}");
    let warm = interval_line(0, &interval(0, 1000, 12_000, true), s);
    assert!(
        warm.ends_with("  (warm-up requests in it are left out of the totals)"),
        "{warm}"
    );
}

#[test]
fn a_final_sliver_shows_what_completed_in_it_without_rates() {
    let every = Duration::from_secs(1);
    // 13 ms after the last tick: a tenth of the interval is the line between the two forms.
    let sliver = interval_line(0, &interval(3000, 3013, 290, false), every);
    assert_eq!(
        sliver,
        "[run 0    3.0 s, last 13.00 ms] 290 completed  errors 0  dropped 0  in flight 3"
    );
    let tenth = interval_line(0, &interval(3000, 3100, 290, false), every);
    assert!(tenth.starts_with("[run 0    3.0-3.1   s]"), "{tenth}");
    assert!(tenth.contains("2,900 req/s"), "{tenth}");
}

/// A third-party client's connections do not say how many requests they carried at once:
/// its summary says nothing of streams rather than "at most 0".
#[test]
fn a_third_party_run_has_no_streams_line() {
    use qbench_core::client_program::ClientProgram;
    use qbench_core::report::third_party::{ThirdPartyRun, TimingSource};
    let mut r = Recorder::new(0, 1, Duration::ZERO);
    let c = r.connection_started(Duration::ZERO);
    r.handshake_done(c, Duration::from_millis(2), Default::default());
    // As a third-party client's objects are: on no stream qbench knows of.
    r.object(qbench_core::ObjectOutcome {
        intended: None,
        began: None,
        sent: Duration::from_millis(2),
        headers: Some(Duration::from_millis(5)),
        done: Duration::from_millis(10),
        body_bytes: 1000,
        error: None,
        status: Some(200),
        stream: None,
    });
    let mut run = r.finish(Duration::from_millis(10));
    run.third_party = Some(ThirdPartyRun {
        client: ClientProgram::Curl,
        version: None,
        timings: TimingSource::Client,
        verified: 0,
        unverified: 0,
        processes: Vec::new(),
        notes: Vec::new(),
    });
    let text = summary(&side(Protocol::H2, vec![run]), "curl h2");
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("streams")),
        "{text}"
    );
}

/// Socket buffer drops and TCP's resent segments are summed over the runs and say whose
/// counters they are; a run without them adds no line.
#[test]
fn the_sockets_line_names_where_datagrams_were_dropped() {
    use qbench_core::report::net_counters::{NetCounters, NetScope, RunNetCounters};
    let none = summary(
        &side(Protocol::H3, vec![round(0, 1_000_000, 1.0, None)]),
        "h",
    );
    assert!(!none.contains("sockets"), "{none}");
    let mut r = side(
        Protocol::H3,
        vec![
            round(0, 1_000_000, 1.0, None),
            round(1, 1_000_000, 1.0, None),
        ],
    );
    let c = NetCounters {
        udp_rcvbuf_errors: 1_500,
        tcp_retrans_segs: 2,
        ..NetCounters::default()
    };
    let s = NetCounters {
        udp_sndbuf_errors: 3,
        ..NetCounters::default()
    };
    for run in &mut r.runs {
        run.net = Some(RunNetCounters {
            scope: NetScope::Namespaces,
            client: c,
            server: Some(s),
            client_udp_rcvbuf: Some(425_984),
            server_udp_rcvbuf: Some(8_388_608),
            client_udp_sndbuf: Some(212_992),
            server_udp_sndbuf: None,
        });
    }
    assert_eq!(
        line(&summary(&r, "h"), "sockets"),
        "  sockets        full buffers dropped 3,006 datagrams (client 3,000 receiving, 0 \
         sending; server 0 receiving, 6 sending); TCP sent 4 segments again (client 4, server \
         0) (each namespace's kernel counters, 2 runs); UDP receive buffers granted: client 416 \
         KiB, server 8 MiB; send buffers: client 208 KiB, server -"
    );
    for run in &mut r.runs {
        run.net = Some(RunNetCounters {
            scope: NetScope::Host,
            client: c,
            server: None,
            client_udp_rcvbuf: None,
            server_udp_rcvbuf: None,
            client_udp_sndbuf: None,
            server_udp_sndbuf: None,
        });
    }
    assert_eq!(
        line(&summary(&r, "h"), "sockets"),
        "  sockets        full buffers dropped 3,000 datagrams (3,000 receiving, 0 sending); TCP \
         sent 4 segments again (the host's kernel counters, every program's, 2 runs)"
    );
}

/// TCP's timeouts, a receiver's dropped segments and the interfaces' drops are named by side
/// where they are not zero; runs where all are zero, or were not read, add no line.
#[test]
fn the_kernel_drops_line_names_only_what_is_not_zero() {
    use qbench_core::report::net_counters::{
        NetCounters, NetScope, RunNetCounters, TcpExtCounters,
    };
    let mut r = side(
        Protocol::H2,
        vec![
            round(0, 1_000_000, 1.0, None),
            round(1, 1_000_000, 1.0, None),
        ],
    );
    let quiet = NetCounters {
        tcp_retrans_segs: 9,
        tcp_ext: Some(TcpExtCounters {
            tcp_ofo_queue: 40,
            tcp_lost_retransmit: 2,
            ..TcpExtCounters::default()
        }),
        nic_rx_dropped: Some(0),
        nic_tx_dropped: Some(0),
        ..NetCounters::default()
    };
    let net = |client: NetCounters, server: Option<NetCounters>| RunNetCounters {
        scope: NetScope::Namespaces,
        client,
        server,
        client_udp_rcvbuf: None,
        server_udp_rcvbuf: None,
        client_udp_sndbuf: None,
        server_udp_sndbuf: None,
    };
    for run in &mut r.runs {
        run.net = Some(net(quiet, Some(quiet)));
    }
    let text = summary(&r, "h");
    assert!(!text.contains("kernel drops"), "{text}");
    assert!(text.contains("  sockets "), "{text}");

    let client = NetCounters {
        tcp_ext: Some(TcpExtCounters {
            tcp_timeouts: 3,
            tcp_spurious_rtos: 1,
            tcp_backlog_drop: 1_000,
            tcp_ofo_drop: 2,
            ..TcpExtCounters::default()
        }),
        ..quiet
    };
    let server = NetCounters {
        nic_rx_dropped: Some(5),
        ..quiet
    };
    for run in &mut r.runs {
        run.net = Some(net(client, Some(server)));
    }
    assert_eq!(
        line(&summary(&r, "h"), "kernel drops"),
        "  kernel drops   client 6 TCP timeouts (2 spurious), 2,004 TCP segments dropped (2,000 \
         backlog full, 4 out of order); server 10 packets dropped by interfaces (10 receiving, 0 \
         sending)"
    );
    // The host's counters have no sides; a kernel without netstat says only the interfaces'.
    let host = NetCounters {
        tcp_ext: None,
        nic_tx_dropped: Some(1),
        ..client
    };
    for run in &mut r.runs {
        run.net = Some(RunNetCounters {
            scope: NetScope::Host,
            ..net(host, None)
        });
    }
    assert_eq!(
        line(&summary(&r, "h"), "kernel drops"),
        "  kernel drops   2 packets dropped by interfaces (0 receiving, 2 sending) (the host's, \
         every program's)"
    );
}

/// An open loop's start lag: `all` us for every request, `own` us of it the client's.
fn lagged(all: u64, own: u64) -> qbench_core::report::load::LoadSummary {
    let h = |us: u64| {
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_micros(us));
        Some(HistogramExport::from(&h))
    };
    qbench_core::report::load::LoadSummary {
        achieved_rate: qbench_core::Stats::of(&[1000.0]),
        completed_rate: qbench_core::Stats::of(&[1000.0]),
        late: 1,
        dropped: 0,
        dropped_late: 0,
        lag: h(all),
        client_lag: h(own),
        client_late: u64::from(own > 2000),
        service_time: h(1000),
    }
}

/// A start lag the connections added after the client took the requests up on time is said
/// apart; one the client itself was late for, or under 2 ms more, is not.
#[test]
fn a_wait_for_the_connection_is_said_apart_from_the_clients_lag() {
    let w = super::run::waited(&lagged(1_700_000, 1_000)).expect("a wait");
    assert!(w.starts_with("start lag p99 1.7"), "{w}");
    assert!(
        w.contains("the client's own p99 1.00 ms (0 taken up late)"),
        "{w}"
    );
    assert_eq!(super::run::waited(&lagged(1_700_000, 900_000)), None);
    assert_eq!(super::run::waited(&lagged(2_400, 500)), None);
    assert!(super::run::waited(&lagged(3_100, 0)).is_some());
}
