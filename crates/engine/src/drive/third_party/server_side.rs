//! The in-process server's view of a run, attached to the run's report: its connections and
//! requests on the run's clock, and each connection's sender telemetry.

use std::time::Duration;

use qbench_core::report::ccstate::StateMachine;
use qbench_core::report::server_view::{ConnTimes, RequestTimes, ServerView};
use qbench_core::report::telemetry::Timeline;
use qbench_core::RunReport;
use qbench_server::truth::Seen;

use crate::measure::clock::Clock;

pub(super) fn attach(report: &mut RunReport, seen: Seen, clock: Clock, start: Duration) {
    let at = |t: std::time::Instant| clock.offset_of(t).saturating_sub(start);
    let conns: Vec<ConnTimes> = seen
        .conns
        .iter()
        .map(|c| ConnTimes {
            quic: c.quic,
            peer_port: c.peer.port(),
            accepted: at(c.accepted),
            handshake: c.handshake.map(at),
        })
        .collect();
    let requests: Vec<RequestTimes> = seen
        .requests
        .iter()
        .map(|r| RequestTimes {
            conn: r.conn,
            received: at(r.received),
            head: r.head.map(at),
            last: r.last.map(at),
            body_bytes: r.body_bytes,
            complete: r.complete,
        })
        .collect();
    report.server_view = Some(ServerView::build(&conns, &requests, seen.dropped));
    // The sender's telemetry, as qbench's own clients fetch it over the connection.
    let timelines: Vec<Timeline> = seen
        .conns
        .iter()
        .filter_map(|c| c.telemetry.as_ref()?.timeline())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    if !timelines.is_empty() {
        let refs: Vec<&Timeline> = timelines.iter().collect();
        report.cc_states = Some(StateMachine::infer(&refs));
        report.telemetry = Some(timelines);
    }
}
