//! A run as the server saw it: every connection and request with the server's own times, on
//! the run's clock. Kept for third-party clients, which report little or differently, so that
//! every client is compared on the same figures too.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::histogram::{HistogramExport, LatencyHistogram};

/// One connection the server accepted during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerConnection {
    /// `quic` or `tcp`.
    pub transport: String,
    /// The client's port: tells its connections apart.
    pub peer_port: u16,
    /// Accepted (TCP) or first Initial taken (QUIC), from the run's start.
    pub accepted_us: u64,
    /// From `accepted_us` to the handshake done: TLS over TCP; over QUIC the server's handshake
    /// complete, the client's Finished in, one round trip after the first Initial (for a server
    /// also confirmed; requests may be answered before it, at 0.5-RTT).
    pub handshake_us: Option<u64>,
    pub requests: u64,
    pub body_bytes: u64,
}

/// Server-side figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerView {
    pub connections: Vec<ServerConnection>,
    /// Requests read whole.
    pub requests: u64,
    /// Responses whose every body byte was handed to the HTTP stack.
    pub complete: u64,
    pub body_bytes: u64,
    /// First request read and last body byte handed over, from the run's start.
    pub first_request_us: Option<u64>,
    pub last_byte_us: Option<u64>,
    /// Body bits per second between those two.
    pub goodput_bps: Option<f64>,
    /// Request read -> response head handed over.
    pub head: HistogramExport,
    /// Request read -> last body byte handed over (complete responses).
    pub response: HistogramExport,
    /// Handshakes (accepted -> done).
    pub handshake: HistogramExport,
    /// Connections and requests beyond the server's bounds, not kept.
    pub dropped: u64,
}

/// A connection's times, from the run's start.
#[derive(Debug, Clone)]
pub struct ConnTimes {
    pub quic: bool,
    pub peer_port: u16,
    pub accepted: Duration,
    pub handshake: Option<Duration>,
}

/// A request's times, from the run's start.
#[derive(Debug, Clone)]
pub struct RequestTimes {
    pub conn: usize,
    pub received: Duration,
    pub head: Option<Duration>,
    pub last: Option<Duration>,
    pub body_bytes: u64,
    pub complete: bool,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl ServerView {
    pub fn build(conns: &[ConnTimes], requests: &[RequestTimes], dropped: u64) -> Self {
        let mut out: Vec<ServerConnection> = conns
            .iter()
            .map(|c| ServerConnection {
                transport: if c.quic { "quic" } else { "tcp" }.into(),
                peer_port: c.peer_port,
                accepted_us: us(c.accepted),
                handshake_us: c.handshake.map(|h| us(h.saturating_sub(c.accepted))),
                requests: 0,
                body_bytes: 0,
            })
            .collect();
        let (mut head, mut response, mut handshake) = (
            LatencyHistogram::new(),
            LatencyHistogram::new(),
            LatencyHistogram::new(),
        );
        for c in conns {
            if let Some(h) = c.handshake {
                handshake.record(h.saturating_sub(c.accepted));
            }
        }
        let (mut complete, mut bytes) = (0, 0u64);
        let (mut first, mut last): (Option<Duration>, Option<Duration>) = (None, None);
        for r in requests {
            if let Some(c) = out.get_mut(r.conn) {
                c.requests += 1;
                c.body_bytes += r.body_bytes;
            }
            bytes += r.body_bytes;
            first = Some(first.map_or(r.received, |f| f.min(r.received)));
            if let Some(h) = r.head {
                head.record(h.saturating_sub(r.received));
            }
            if let (true, Some(l)) = (r.complete, r.last) {
                complete += 1;
                response.record(l.saturating_sub(r.received));
                last = Some(last.map_or(l, |x| x.max(l)));
            }
        }
        let goodput_bps = match (first, last) {
            (Some(f), Some(l)) if l > f && bytes > 0 => {
                Some(bytes as f64 * 8.0 / (l - f).as_secs_f64())
            }
            _ => None,
        };
        Self {
            connections: out,
            requests: requests.len() as u64,
            complete,
            body_bytes: bytes,
            first_request_us: first.map(us),
            last_byte_us: last.map(us),
            goodput_bps,
            head: HistogramExport::from(&head),
            response: HistogramExport::from(&response),
            handshake: HistogramExport::from(&handshake),
            dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn adds_up_per_connection_and_run() {
        let conns = [
            ConnTimes {
                quic: true,
                peer_port: 5000,
                accepted: ms(1),
                handshake: Some(ms(3)),
            },
            ConnTimes {
                quic: false,
                peer_port: 5001,
                accepted: ms(2),
                handshake: None,
            },
        ];
        let req = |conn, received, last, body_bytes, complete| RequestTimes {
            conn,
            received: ms(received),
            head: Some(ms(received + 1)),
            last: Some(ms(last)),
            body_bytes,
            complete,
        };
        let v = ServerView::build(
            &conns,
            &[
                req(0, 4, 14, 1000, true),
                req(0, 5, 9, 10, false),
                req(1, 6, 8, 0, true),
            ],
            2,
        );
        assert_eq!(v.requests, 3);
        assert_eq!(v.complete, 2);
        assert_eq!(v.body_bytes, 1010);
        assert_eq!(
            (v.first_request_us, v.last_byte_us),
            (Some(4000), Some(14_000))
        );
        assert_eq!(v.connections[0].handshake_us, Some(2000));
        assert_eq!(
            (v.connections[0].requests, v.connections[0].body_bytes),
            (2, 1010)
        );
        assert_eq!(v.connections[1].transport, "tcp");
        assert_eq!(v.response.summary.count, 2);
        assert_eq!(v.handshake.summary.count, 1);
        let g = v.goodput_bps.unwrap();
        assert!((g - 1010.0 * 8.0 / 0.010).abs() < 1e-6, "{g}");
        assert_eq!(v.dropped, 2);
    }

    #[test]
    fn nothing_seen_is_no_figure() {
        let v = ServerView::build(&[], &[], 0);
        assert_eq!(
            (v.requests, v.goodput_bps, v.first_request_us),
            (0, None, None)
        );
    }
}
