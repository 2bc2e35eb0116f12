//! h2's time to first byte over an emulated 100 ms link (root): one round trip whatever the
//! object's size, on a fresh connection and after the connection has idled, because the
//! server's TLS records of a first flight end within TCP's window
//! (`crates/server/src/records.rs`). Before, a response's head shared a 16 KiB record with its
//! body and waited for the second flight: TTFB 201-214 ms from 20 KB up, and after every idle
//! gap.

use crate::common;

use common::assert_complete;
use common::links::{fetch_over, ours};
use common::needs::{require, Need};
use serde_json::Value;

const LINK: &str = "rtt=100ms";
/// One round trip and then some: a loaded two-core machine adds milliseconds, a second round
/// trip adds 100.
const ONE_RTT_US: u64 = 150_000;

fn max_us(run: &Value, histogram: &str) -> u64 {
    run[histogram]["max_us"].as_u64().unwrap()
}

#[test]
fn h2_first_byte_takes_one_round_trip_at_every_size() {
    require!(Need::Link);
    let before = ours();
    let mut sender = Value::Null;
    for (size, bytes) in [("10KB", 10_000), ("20KB", 20_000), ("100KB", 100_000)] {
        let r = fetch_over("h2", &format!("1x{size}"), LINK, &["--runs", "3"]);
        assert_complete(&r, 3, 1, bytes);
        let j = r.json.as_ref().unwrap();
        let mut ttfbs = Vec::new();
        for run in j["runs"].as_array().unwrap() {
            let ttfb = max_us(run, "ttfb");
            eprintln!("h2 {size}: TTFB {:.1} ms", ttfb as f64 / 1e3);
            assert!(
                ttfb >= 100_000,
                "{size}: TTFB {ttfb} us, under the link's RTT"
            );
            ttfbs.push(ttfb);
        }
        // A response head held for the second flight would be so in every run; the best of
        // the three is judged, because under the test command's load (4 tests at a time with
        // the kernel VM beside them) one run of a fresh connection has taken 178.7 ms at 100 KB.
        ttfbs.sort_unstable();
        assert!(ttfbs[0] < ONE_RTT_US, "{size}: TTFB {ttfbs:?} us");
        // 10 KB fits TCP's initial window whole: cutting its records must not push its last
        // bytes into a second flight. Records cut wrong would do so in every run; the best of
        // the three is judged, because on a busy machine (the kernel VM beside the tests) the
        // response's packets are coalesced less and two of three runs have taken a second
        // round trip ([103487, 200191, 201471] us), as a connection's first run on a fresh
        // server has now and then done on an idle one.
        if bytes == 10_000 {
            let mut all: Vec<u64> = j["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|run| max_us(run, "object_latency"))
                .collect();
            all.sort_unstable();
            assert!(all[0] < ONE_RTT_US, "{size}: object latencies {all:?} us");
        }
        sender = j["config"]["sender"].clone();
    }
    assert_eq!(sender["tls_records"]["sizing"], "dynamic", "{sender}");
    assert_eq!(ours(), before, "namespaces left behind");
}

#[test]
fn h2_first_byte_takes_one_round_trip_after_idle() {
    require!(Need::Link);
    let before = ours();
    // A request every 2 s over one connection: each after the server has sent nothing for
    // longer than its retransmission timeout, when Linux restarts from the initial window.
    // Records cut wrong hold every such request's head for a second flight, in every try; a
    // loaded machine has delayed one request of one try past 150 ms, so up to 3 tries are
    // judged by the best.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = fetch_over("h2", "1x20KB", LINK, &["--duration", "5s", "--rate", "0.5"]);
        assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
        let j = r.json.as_ref().unwrap();
        let run = &j["runs"][0];
        assert_eq!(run["connections"].as_array().unwrap().len(), 1, "{run}");
        let n = run["ttfb"]["count"].as_u64().unwrap();
        assert!(n >= 2, "{n} requests");
        let ttfb = max_us(run, "ttfb");
        eprintln!(
            "h2 20KB every 2 s: TTFB at most {:.1} ms",
            ttfb as f64 / 1e3
        );
        seen.push((n, ttfb));
        if ttfb < ONE_RTT_US {
            break;
        }
    }
    assert!(
        seen.iter().any(|&(_, t)| t < ONE_RTT_US),
        "the slowest TTFB of each try (requests, us): {seen:?}"
    );
    assert_eq!(ours(), before, "namespaces left behind");
}
