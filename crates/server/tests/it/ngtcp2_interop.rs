//! ngtcp2's example client (a QUIC client nobody here wrote) against the server, with the
//! truth log on: every connection it completes has its handshake in the log, ahead of the
//! requests that followed it.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::needs::{require, Need};

/// ngtcp2 0.12 sends its Finished and its first requests in one datagram (its pacing timer
/// holds both, about 22 ms on loopback): the server's connection takes the requests in the
/// same turn as the handshake's end. The handshake's moment must still be logged first, and
/// logged at all: a run reads the log as soon as its client exits.
#[test]
fn every_completed_quic_handshake_is_logged_before_its_requests() {
    require!(Need::Tool("gtlsclient"));
    let s = common::server(|_| {});
    let truth = s.truth();
    truth.enable();
    let dir = tempfile::tempdir().unwrap();
    let port = s.local_addr().port().to_string();
    let url = |n: u32| format!("https://127.0.0.1:{port}/bytes/{n}");
    for round in 0..10 {
        let _ = truth.take();
        let out = Command::new("gtlsclient")
            .args(["-q", "--exit-on-all-streams-close", "--timeout=10s"])
            .arg(format!("--download={}", dir.path().display()))
            .args(["127.0.0.1", &port, &url(1000), &url(20_000), &url(3000)])
            .output()
            .unwrap();
        assert!(out.status.success(), "round {round}: {out:?}");
        // As a run does: the log is read the moment the client has exited.
        let seen = truth.take();
        assert_eq!(seen.conns.len(), 1, "round {round}");
        assert_eq!(seen.requests.len(), 3, "round {round}");
        let c = &seen.conns[0];
        let handshake = c
            .handshake
            .unwrap_or_else(|| panic!("round {round}: a completed connection has no handshake"));
        for r in &seen.requests {
            assert!(
                handshake <= r.received,
                "round {round}: handshake logged {:?} after a request it preceded",
                handshake - r.received
            );
        }
        assert!(handshake - c.accepted < Duration::from_secs(5));
    }
}
