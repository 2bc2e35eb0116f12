//! `rate=mahimahi:FILE` on a real link (root, as CI): a synthetic delivery trace whose mean
//! rate and on/off pattern are known, measured by a UDP flow from outside the emulator.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::needs::{require, Need};
use qbench_shaper::{netns, BackendChoice, Topology, TopologyOptions};

fn socket_in(ns: &str, addr: &str) -> UdpSocket {
    let (ns, addr) = (ns.to_string(), addr.to_string());
    std::thread::spawn(move || {
        netns::enter(&ns).unwrap();
        let s = UdpSocket::bind(format!("{addr}:0")).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        s
    })
    .join()
    .unwrap()
}

/// Arrival times of a flow of 1472-byte datagrams (1514 bytes as tc counts them) offered at
/// `bps` for `secs` from the server's namespace to the client's.
fn arrivals(topo: &Topology, bps: f64, secs: f64) -> Vec<Duration> {
    let n = topo.names();
    let rx = socket_in(&n.client, &n.client_addr());
    let tx = socket_in(&n.server, &n.server_addr());
    tx.connect(rx.local_addr().unwrap()).unwrap();
    let start = Instant::now();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut at = Vec::new();
        let mut quiet = Instant::now();
        while quiet.elapsed() < Duration::from_millis(600) && at.len() < 1_000_000 {
            if rx.recv(&mut buf).is_ok() {
                at.push(start.elapsed());
                quiet = Instant::now();
            }
        }
        at
    });
    let packet = [0u8; 1472];
    let pps = bps / (1514.0 * 8.0);
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        if (sent as f64) < start.elapsed().as_secs_f64() * pps {
            let _ = tx.send(&packet);
            sent += 1;
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    receiver.join().unwrap()
}

#[test]
fn a_delivery_trace_delivers_its_rate_and_its_gaps() {
    require!(Need::Link);
    // 200 ms of two packets a millisecond (24 Mbit/s), then 200 ms of nothing; it loops.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("onoff.trace");
    let mut text = String::new();
    for t in 1..=200 {
        text.push_str(&format!("{t}\n{t}\n"));
    }
    text.push_str("400\n");
    std::fs::write(&trace, text).unwrap();
    let spec = format!("down.rate=mahimahi:{},up.rate=100mbit", trace.display());
    let opts = TopologyOptions::plain(BackendChoice::Userspace);
    let topo = Topology::up(spec.parse().unwrap(), &opts).expect("link up (root)");
    let at = arrivals(&topo, 30e6, 4.0);
    let changes = topo.report().rate_changes;
    drop(topo);
    // From the first arrival's loop on, two seconds: five periods.
    let first = at[0];
    let window = Duration::from_secs(2);
    let inside: Vec<Duration> = at
        .iter()
        .map(|t| *t - first)
        .filter(|t| *t < window)
        .collect();
    let mbps = inside.len() as f64 * 1514.0 * 8.0 / window.as_secs_f64() / 1e6;
    eprintln!(
        "{mbps:.2} Mbit/s; arrivals per 50 ms: {:?}",
        bins_of(&inside)
    );
    // The trace's mean is 12.03 Mbit/s.
    assert!((10.8..=13.2).contains(&mbps), "{mbps} Mbit/s");
    // In 50 ms bins: about half carry the on-rate, about half (nearly) nothing.
    let bins = bins_of(&inside);
    let on = bins
        .iter()
        .filter(|b| f64::from(**b) * 1514.0 * 8.0 / 0.05 > 18e6)
        .count();
    let off = bins
        .iter()
        .filter(|b| f64::from(**b) * 1514.0 * 8.0 / 0.05 < 3e6)
        .count();
    assert!(
        (14..=22).contains(&on) && (14..=22).contains(&off),
        "{bins:?}"
    );
    // Every change is recorded, both rates each period.
    let down: Vec<u64> = changes
        .iter()
        .filter(|c| c.direction == "down")
        .map(|c| c.rate_bps)
        .collect();
    assert!(down.len() >= 18, "{down:?}");
    assert!(
        down.iter()
            .all(|r| [24_000_000, 8_000, 1_200_000].contains(r)),
        "{down:?}"
    );
}

fn bins_of(inside: &[Duration]) -> Vec<u32> {
    let mut bins = vec![0u32; 40];
    for t in inside {
        bins[(t.as_millis() / 50) as usize] += 1;
    }
    bins
}
