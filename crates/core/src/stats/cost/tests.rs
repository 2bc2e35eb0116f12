//! Tests of the cost model (`cost.rs`).

use super::*;

fn estimates(suite: &str, mtu: u16) -> Estimates {
    let mut e = Estimates::new();
    for f in ["produce", "ack", "consume"] {
        e.insert(format!("quic_packet/{f}/{suite}-{mtu}-gso"), 1000.0);
        e.insert(format!("quic_packet/{f}/aes256gcm-1452-gso"), 1000.0);
    }
    // quinn's async layer: 1 us per packet above the three rows.
    e.insert("quic_runtime/transfer/aes256gcm-1452".into(), 4500.0);
    e.insert("quic_runtime/link/1452".into(), 500.0);
    for id in [
        "socket_pipe/udp/gso",
        "socket_pipe/tcp/65536",
        "socket_io/tcp_write/65536",
        "socket_io/tcp_read/65536",
        "http_framing/h3_data/262144",
        "http_framing/h2_data/262144",
    ] {
        e.insert(id.into(), 1000.0);
    }
    for f in ["seal", "open"] {
        e.insert(format!("tls_record/{f}/{suite}-16384"), 1000.0);
    }
    e.insert("sys_cost/wakeup/tokio".into(), 5000.0);
    e.insert("sys_cost/page_fault/anon-4k".into(), 500.0);
    e.insert("socket_io/udp_send/sendmsg".into(), 3000.0);
    e.insert("socket_io/udp_recv/recvmmsg".into(), 1000.0);
    e.insert("socket_io/tcp_write/16384".into(), 1000.0);
    e.insert("socket_io/tcp_read/16384".into(), 1000.0);
    e
}

fn run(cpu_s: f64, payload_bytes: u64) -> MeasuredRun {
    MeasuredRun {
        cpu_s,
        payload_bytes,
        events: EventCounts::default(),
    }
}

#[test]
fn components_scale_by_units_per_gigabyte() {
    let m = CostModel::new(&estimates("aes256gcm", 1452), "aes256gcm", 1452).unwrap();
    let packets = 1e9 / (1452 - QUIC_PACKET_OVERHEAD) as f64;
    // Five per-packet components at 1 us each (one of them quinn's async layer), plus one
    // frame per 256 KiB.
    let quic = 5.0 * packets * 1e-6 + 1e9 / 262144.0 * 1e-6;
    assert!((m.predicted_quic_cpu_s_per_gb - quic).abs() < 1e-9);
    let records = 1e9 / 16384.0;
    let ios = records * 16406.0 / 65536.0;
    let tcp = (2.0 * records + ios + 1e9 / 262144.0) * 1e-6;
    assert!((m.predicted_tcp_tls_cpu_s_per_gb - tcp).abs() < 1e-9);
    assert_eq!(m.rows.len(), 10);
}

#[test]
fn the_async_layer_is_what_quinn_adds_above_quinn_proto_and_never_negative() {
    let row = |e: &Estimates| {
        let m = CostModel::new(e, "chacha20", 1200).unwrap();
        m.rows
            .into_iter()
            .find(|r| r.component == "quinn's endpoint and connection tasks")
            .unwrap()
    };
    let mut e = estimates("chacha20", 1200);
    let r = row(&e);
    assert_eq!(r.ns_per_unit, 1000.0);
    assert_eq!(r.units_per_gb, 1e9 / (1200 - QUIC_PACKET_OVERHEAD) as f64);
    e.insert("quic_runtime/transfer/aes256gcm-1452".into(), 3000.0);
    assert_eq!(row(&e).ns_per_unit, 0.0);
    e.remove("quic_runtime/transfer/aes256gcm-1452");
    assert_eq!(
        CostModel::new(&e, "chacha20", 1200),
        Err(CostError::Missing(
            "quic_runtime/transfer/aes256gcm-1452".into()
        ))
    );
}

#[test]
fn missing_benchmarks_and_bad_parameters_are_named() {
    let mut e = estimates("chacha20", 1200);
    assert_eq!(
        CostModel::new(&e, "aes", 1200),
        Err(CostError::Suite("aes".into()))
    );
    assert_eq!(
        CostModel::new(&e, "chacha20", 1500),
        Err(CostError::Mtu(1500))
    );
    e.remove("socket_pipe/udp/gso");
    assert_eq!(
        CostModel::new(&e, "chacha20", 1200),
        Err(CostError::Missing("socket_pipe/udp/gso".into()))
    );
}

#[test]
fn measured_is_the_median_per_gigabyte_and_ignores_empty_runs() {
    let m = CostModel::new(&estimates("aes128gcm", 1452), "aes128gcm", 1452).unwrap();
    let runs = [
        run(2.0, 1_000_000_000),
        run(3.0, 1_000_000_000),
        run(1.0, 500_000_000),
        run(9.0, 0),
    ];
    let got = Measured::new("r.json".into(), Stack::Quic, &runs, &m).unwrap();
    assert!(Measured::new("z.json".into(), Stack::Quic, &[run(1.0, 0)], &m).is_none());
    assert_eq!(got.runs, 3);
    assert_eq!(got.cpu_s_per_gb, 2.0);
    // No run counted events: the prediction is the benches' alone.
    assert!(got.events.is_empty());
    assert_eq!(
        got.predicted_with_events_cpu_s_per_gb,
        got.predicted_cpu_s_per_gb
    );
    assert!((got.ratio - 2.0 / m.predicted_quic_cpu_s_per_gb).abs() < 1e-12);
}

#[test]
fn counted_events_add_their_benches_cost_per_gigabyte() {
    let m = CostModel::new(&estimates("aes256gcm", 1452), "aes256gcm", 1452).unwrap();
    let ack = m
        .events
        .iter()
        .find(|e| e.event == Event::AckDatagram)
        .unwrap();
    assert_eq!(ack.ns_per_event, 4000.0);
    // 64 KiB reads and writes at 1 us and 16 KiB ones too: no fixed cost per call.
    let tcp = m
        .events
        .iter()
        .find(|e| e.event == Event::TcpReadCall)
        .unwrap();
    assert_eq!(tcp.ns_per_event, 1000.0);
    let counted = |wakeups, ack_datagrams| EventCounts {
        wakeups: Some(wakeups),
        page_faults: Some(1000.0),
        ack_datagrams,
        ..EventCounts::default()
    };
    let runs = [
        MeasuredRun {
            cpu_s: 2.0,
            payload_bytes: 2_000_000_000,
            events: counted(200_000.0, Some(20_000.0)),
        },
        MeasuredRun {
            cpu_s: 1.0,
            payload_bytes: 1_000_000_000,
            events: counted(100_000.0, None),
        },
    ];
    let got = Measured::new("r.json".into(), Stack::TcpTls, &runs, &m).unwrap();
    // ACK datagrams are left out: one run did not count them.
    let rows: Vec<(Event, f64)> = got.events.iter().map(|e| (e.event, e.per_gb)).collect();
    assert_eq!(
        rows,
        [(Event::Wakeup, 100_000.0), (Event::PageFault, 750.0)]
    );
    // 100,000 wakeups at 5 us and 750 faults at 0.5 us per GB.
    let extra = 0.5 + 750.0 * 500.0 / 1e9;
    let want = m.predicted_tcp_tls_cpu_s_per_gb + extra;
    assert!((got.predicted_with_events_cpu_s_per_gb - want).abs() < 1e-12);
    assert!((got.ratio - 1.0 / want).abs() < 1e-12);
}

#[test]
fn a_calls_fixed_cost_is_what_a_smaller_call_does_not_save() {
    let mut e = estimates("aes256gcm", 1452);
    // 2 us per 16 KiB read, 5 us per 64 KiB: 1 us fixed and 1 us per 16 KiB.
    e.insert("socket_io/tcp_read/16384".into(), 2000.0);
    e.insert("socket_io/tcp_read/65536".into(), 5000.0);
    let m = CostModel::new(&e, "aes256gcm", 1452).unwrap();
    let read = m
        .events
        .iter()
        .find(|e| e.event == Event::TcpReadCall)
        .unwrap();
    assert!((read.ns_per_event - 1000.0).abs() < 1e-9);
    assert_eq!(read.benches[0], "socket_io/tcp_read/16384");
    // 1 GB in 16 KiB reads: three calls more per 64 KiB than the model's.
    let beyond = EventCounts::calls_beyond_model(61_036, 1_000_000_000);
    assert!((beyond - (61_036.0 - 1e9 / 65536.0)).abs() < 1e-9);
    e.remove("socket_io/tcp_write/16384");
    assert_eq!(
        CostModel::new(&e, "aes256gcm", 1452),
        Err(CostError::Missing("socket_io/tcp_write/16384".into()))
    );
}
