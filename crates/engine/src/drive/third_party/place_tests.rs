//! Placing a process's reported times on the run's clock, and its objects against the server's.

use super::*;
use qbench_server::truth::ConnSeen;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn conn(connected: u64, port: Option<u16>, odcid: Option<&str>) -> ConnOut {
    ConnOut {
        started: ms(connected - 100),
        handshake: Some(ms(connected + 100)),
        error: None,
        local_port: port,
        alpn: None,
        connected: Some(ms(connected)),
        one_way: odcid.map(|_| ms(40)),
        odcid: odcid.map(str::to_string),
    }
}

fn seen(clock: Clock, accepted: u64, rtt: Option<u64>, odcid: Option<&str>) -> Seen {
    Seen {
        conns: vec![ConnSeen {
            peer: "198.18.0.1:5000".parse().unwrap(),
            quic: odcid.is_some(),
            accepted: clock.at(ms(accepted)).into_std(),
            handshake: None,
            odcid: odcid.map(str::to_string),
            handshake_rtt: rtt.map(ms),
            telemetry: None,
        }],
        requests: Vec::new(),
        dropped: 0,
    }
}

#[test]
fn a_tcp_connect_is_placed_a_one_way_delay_before_the_servers_accept() {
    let clock = Clock::start();
    // Laid from the spawn, curl connected at 130 ms; the server accepted at 1000 ms, on a
    // handshake of 100 ms RTT: the ACK left 50 ms before, its SYN 150 ms before.
    let mut r = Reported {
        conns: vec![conn(130, Some(5000), None)],
        ..Reported::default()
    };
    let a = anchor(&mut r, Some(&seen(clock, 1000, Some(100), None)), clock).unwrap();
    assert_eq!(a.event, AnchorEvent::ServerTcpAccept);
    assert_eq!(a.one_way_us, Some(50_000));
    assert_eq!(r.conns[0].connected, Some(ms(950)));
    assert_eq!(r.conns[0].started, ms(850));
    assert_eq!(r.anchor, Some(AnchorEvent::ServerTcpAccept));
}

#[test]
fn a_quic_initial_is_placed_by_its_own_half_round_trip() {
    let clock = Clock::start();
    let mut r = Reported {
        conns: vec![conn(130, None, Some("ab01"))],
        ..Reported::default()
    };
    let a = anchor(&mut r, Some(&seen(clock, 1000, None, Some("ab01"))), clock).unwrap();
    assert_eq!(
        (a.event, a.one_way_us),
        (AnchorEvent::ServerQuicInitial, Some(40_000))
    );
    assert_eq!(r.conns[0].connected, Some(ms(960)));
    // A connection the server never saw leaves the times where they were.
    let mut r = Reported {
        conns: vec![conn(130, None, Some("ffff"))],
        anchor: Some(AnchorEvent::Spawn),
        ..Reported::default()
    };
    assert!(anchor(&mut r, Some(&seen(clock, 1000, None, Some("ab01"))), clock).is_none());
    assert_eq!(
        (r.conns[0].connected, r.anchor),
        (Some(ms(130)), Some(AnchorEvent::Spawn))
    );
}
