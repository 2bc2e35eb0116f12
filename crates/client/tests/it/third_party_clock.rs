//! Every third-party client on the run's one clock: over a 100 ms RTT link, the server reads
//! a client's first request a one-way delay after the client sent it, and accepts its
//! connection 1.5 round trips (TCP: SYN, SYN-ACK, ACK) or half a round trip (QUIC: the first
//! Initial) after the client began it; and on loopback a client's start-up is not in its PLT.

use std::ffi::OsStr;

use serde_json::Value;

use crate::common;
use common::needs::{require, Need};

/// The link's round trip, and how far a placed figure may stray from what the link makes it
/// on a loaded 2-core machine.
const RTT_MS: f64 = 100.0;
const TOLERANCE_MS: f64 = 15.0;
const ATTEMPTS: usize = 3;

fn run0(r: &common::Run) -> &Value {
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    &r.json.as_ref().expect("a JSON report")["runs"][0]
}

fn ms(v: &Value) -> f64 {
    v.as_u64().unwrap_or_else(|| panic!("a time: {v}")) as f64 / 1000.0
}

fn sorted_ms(list: &Value, key: &str) -> Vec<f64> {
    let mut v: Vec<f64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ms(&c[key]))
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// One run of `client` over the link; the figures that mix the client's times and the
/// server's, in milliseconds: the server's first request read less the client's first
/// request sent, and each connection's accept less its start.
fn mixed(client: &str, proto: &str, env: &[(&str, &OsStr)]) -> (f64, Vec<f64>, Value) {
    let args = [
        "--client",
        client,
        "--proto",
        proto,
        "--objects",
        "2x20KB",
        "--link",
        "rtt=100ms",
        "--no-calibrate",
    ];
    let r = common::qbench_env(&args, env);
    let run = run0(&r).clone();
    assert_eq!(run["complete"], true, "{client}: {}", run["first_error"]);
    let sv = &run["server_view"];
    let request = ms(&sv["first_request_us"]) - ms(&run["first_request_us"]);
    let started = sorted_ms(&run["connections"], "started_us");
    let accepted = sorted_ms(&sv["connections"], "accepted_us");
    assert_eq!(started.len(), accepted.len(), "{client}: {run}");
    let accept = accepted.iter().zip(&started).map(|(a, s)| a - s).collect();
    (request, accept, run)
}

fn near(what: &str, got: f64, want: f64, run: &Value) -> Result<(), String> {
    if (got - want).abs() <= TOLERANCE_MS {
        return Ok(());
    }
    Err(format!(
        "{what}: {got:.1} ms, want {want:.1} +- {TOLERANCE_MS} ms; connections {}, server {}",
        run["connections"], run["server_view"]["connections"]
    ))
}

/// One run's placed figures against the link's, as an error naming the first that strays.
fn on_one_clock(client: &str, proto: &str, env: &[(&str, &OsStr)]) -> Result<(), String> {
    let (request, accepts, run) = mixed(client, proto, env);
    eprintln!("{client} {proto}: first request {request:.1} ms, accepts {accepts:.1?} ms");
    let handshake_rtts = if proto == "h3" { 0.5 } else { 1.5 };
    near(
        &format!("{client}: server's first request - client's"),
        request,
        RTT_MS / 2.0,
        &run,
    )?;
    for a in accepts {
        near(
            &format!("{client}: accepted - connection started"),
            a,
            RTT_MS * handshake_rtts,
            &run,
        )?;
    }
    // The record says how the times were placed, for every process.
    for p in run["third_party"]["processes"].as_array().unwrap() {
        assert!(p["anchor"]["event"].is_string(), "{p}");
    }
    Ok(())
}

/// The userspace link's forwarder shares the 2 cores with the tests beside it, and a packet
/// it holds late moves the server's times by as much: a run whose link strayed is measured
/// again, up to three times. A placement off by half a round trip, as before the fix, misses
/// in every run.
fn assert_on_one_clock(client: &str, proto: &str, env: &[(&str, &OsStr)]) {
    let mut misses = Vec::new();
    for _ in 0..ATTEMPTS {
        match on_one_clock(client, proto, env) {
            Ok(()) => return,
            Err(e) => misses.push(e),
        }
    }
    panic!("{client} {proto}, {ATTEMPTS} runs: {}", misses.join("\n"));
}

#[test]
fn curl_and_h2load_are_on_the_servers_clock_over_a_100ms_link() {
    require!(Need::Link);
    require!(Need::Tool("curl"));
    require!(Need::Tool("h2load"));
    assert_on_one_clock("curl", "h2", &[]);
    assert_on_one_clock("curl", "h1", &[]);
    assert_on_one_clock("h2load", "h2", &[]);
}

#[test]
fn quic_clients_are_on_the_servers_clock_over_a_100ms_link() {
    require!(Need::Link);
    require!(Need::Tool("gtlsclient"));
    assert_on_one_clock("ngtcp2", "h3", &[]);
    require!(Need::Tool("go"));
    let bin = common::go_build("clients/quicgo", "qbench-quicgo");
    assert_on_one_clock("quic-go", "h3", &[("QBENCH_QUICGO", bin.as_os_str())]);
}

/// On loopback a run's times, its PLT included, count from the client's first packet, not
/// from its process's spawn: the run starts with h2load's connection, which comes before
/// the server's accept, not with its 20-50 ms of start-up before. h2load's times are its wall
/// clock's, placed by the one qbench read at the spawn; with a virtual machine busy beside it,
/// about one run in ten placed the connection up to 1 ms after the accept, so a miss is run
/// again (3 tries). Counting from the spawn misses by tens of milliseconds every time.
#[test]
fn h2loads_start_up_is_not_in_its_plt() {
    require!(Need::Tool("h2load"));
    let mut misses = Vec::new();
    for _ in 0..ATTEMPTS {
        match h2load_from_its_connection() {
            Ok(()) => return,
            Err(e) => misses.push(e),
        }
    }
    panic!("h2load, {ATTEMPTS} tries: {}", misses.join("\n"));
}

/// One h2load run of 3: an error naming the first run whose times do not start with its
/// connection.
fn h2load_from_its_connection() -> Result<(), String> {
    let r = common::qbench(&[
        "--client",
        "h2load",
        "--proto",
        "h2",
        "--objects",
        "2x20KB",
        "--runs",
        "3",
    ]);
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    for run in r.json.as_ref().unwrap()["runs"].as_array().unwrap() {
        let started = sorted_ms(&run["connections"], "started_us");
        let accepted = sorted_ms(&run["server_view"]["connections"], "accepted_us");
        eprintln!("h2load: started {started:.3?} ms, accepted {accepted:.3?} ms");
        // Judged by order, not by a bound on the gap: on a busy machine the server's accept
        // can come tens of milliseconds after the connect. Counted from the spawn, the run
        // would start before the connection, by h2load's start-up.
        for (s, a) in started.iter().zip(&accepted) {
            if s > a {
                return Err(format!(
                    "h2load's connection started {s:.3} ms, after the accept at {a:.3} ms"
                ));
            }
        }
        // The PLT's zero, the run's start, is the connection's start.
        if started[0] != 0.0 {
            return Err(format!(
                "the run started {} ms before h2load's connection",
                started[0]
            ));
        }
        assert_eq!(run["plt_us"], run["last_byte_us"]);
    }
    Ok(())
}
