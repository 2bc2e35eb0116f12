//! What the server saw of each connection and request, on its own monotonic clock: the same
//! figures whatever client ran, for clients that report little or report differently.
//! Off unless an in-process server is asked to keep it (a third-party client's run); then
//! bounded, and taken (emptied) after every run.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What gives a connection's sender telemetry (its timeline as JSON) when the run ends.
pub trait Sender: Send + Sync {
    fn timeline(&self) -> Option<bytes::Bytes>;
}

/// Requests kept per run; those beyond are counted, not kept.
pub const MAX_REQUESTS: usize = 1_000_000;
/// Connections kept per run; those beyond are counted, not kept.
pub const MAX_CONNECTIONS: usize = 100_000;

/// One connection as the server saw it.
#[derive(Clone)]
pub struct ConnSeen {
    pub peer: SocketAddr,
    pub quic: bool,
    /// TCP accepted, or the QUIC Initial taken.
    pub accepted: Instant,
    /// TLS done (TCP), or the QUIC handshake complete at the server, the client's Finished in
    /// (for a server also confirmed; requests may be answered before, at 0.5-RTT).
    pub handshake: Option<Instant>,
    /// QUIC: the Destination Connection ID of the client's first Initial, lowercase hex, by
    /// which a client's own log (a qlog's group id) names the connection.
    pub odcid: Option<String>,
    /// TCP: the round trip of the connection's own handshake (SYN-ACK out, ACK in), as the
    /// kernel measured it by the accept: what places a client's connect on the server's clock.
    pub handshake_rtt: Option<std::time::Duration>,
    pub telemetry: Option<Arc<dyn Sender>>,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RequestSeen {
    /// Index into the run's connections.
    pub conn: usize,
    pub path: String,
    /// The request's head and body read.
    pub received: Instant,
    pub status: u16,
    /// The response head handed to the HTTP stack.
    pub head: Option<Instant>,
    /// The last body byte handed to the HTTP stack, or when it gave up.
    pub last: Option<Instant>,
    pub body_bytes: u64,
    /// Every body byte was handed over.
    pub complete: bool,
}

#[derive(Default)]
struct Book {
    conns: Vec<ConnSeen>,
    requests: Vec<RequestSeen>,
    /// Connections and requests beyond the bounds.
    dropped: u64,
    /// Bumped by every `take`: handles from an earlier run write nothing into this one.
    generation: u64,
}

/// Everything seen since the last `take`.
#[derive(Default)]
pub struct Seen {
    pub conns: Vec<ConnSeen>,
    pub requests: Vec<RequestSeen>,
    pub dropped: u64,
}

#[derive(Default)]
pub struct TruthLog {
    on: AtomicBool,
    book: Mutex<Book>,
}

/// A connection's place in the log.
#[derive(Debug, Clone, Copy)]
pub struct ConnMark {
    index: usize,
    generation: u64,
}

/// A request's place in the log.
#[derive(Debug, Clone, Copy)]
pub struct RequestMark {
    index: usize,
    generation: u64,
}

impl TruthLog {
    pub fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // A panic elsewhere while holding it leaves a book still fit to read.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection taken; `odcid` is the QUIC client's original destination CID.
    pub fn connection(
        &self,
        peer: SocketAddr,
        odcid: Option<&[u8]>,
        accepted: Instant,
    ) -> Option<ConnMark> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let mut b = self.book();
        if b.conns.len() >= MAX_CONNECTIONS {
            b.dropped += 1;
            return None;
        }
        b.conns.push(ConnSeen {
            peer,
            quic: odcid.is_some(),
            accepted,
            handshake: None,
            odcid: odcid.map(|c| c.iter().map(|b| format!("{b:02x}")).collect()),
            handshake_rtt: None,
            telemetry: None,
        });
        Some(ConnMark {
            index: b.conns.len() - 1,
            generation: b.generation,
        })
    }

    pub fn handshake(&self, c: Option<ConnMark>, at: Instant) {
        self.with_conn(c, |s| s.handshake = Some(at));
    }

    pub fn handshake_rtt(&self, c: Option<ConnMark>, rtt: std::time::Duration) {
        self.with_conn(c, |s| s.handshake_rtt = Some(rtt));
    }

    pub fn telemetry(&self, c: Option<ConnMark>, t: Option<Arc<dyn Sender>>) {
        self.with_conn(c, |s| s.telemetry = t);
    }

    fn with_conn(&self, c: Option<ConnMark>, f: impl FnOnce(&mut ConnSeen)) {
        let Some(c) = c else { return };
        let mut b = self.book();
        if b.generation == c.generation {
            if let Some(s) = b.conns.get_mut(c.index) {
                f(s);
            }
        }
    }

    /// A request on connection `c`, read whole at `received`.
    pub fn request(
        &self,
        c: Option<ConnMark>,
        path: &str,
        received: Instant,
    ) -> Option<RequestMark> {
        let c = c?;
        let mut b = self.book();
        if b.generation != c.generation {
            // The connection is from an earlier run: its requests belong to no connection
            // of this one.
            return None;
        }
        if b.requests.len() >= MAX_REQUESTS {
            b.dropped += 1;
            return None;
        }
        b.requests.push(RequestSeen {
            conn: c.index,
            path: path.chars().take(256).collect(),
            received,
            status: 0,
            head: None,
            last: None,
            body_bytes: 0,
            complete: false,
        });
        Some(RequestMark {
            index: b.requests.len() - 1,
            generation: b.generation,
        })
    }

    pub fn head(&self, r: Option<RequestMark>, status: u16, at: Instant) {
        self.with_request(r, |s| {
            s.status = status;
            s.head = Some(at);
        });
    }

    pub fn done(&self, r: Option<RequestMark>, body_bytes: u64, complete: bool, at: Instant) {
        self.with_request(r, |s| {
            s.body_bytes = body_bytes;
            s.complete = complete;
            s.last = Some(at);
        });
    }

    fn with_request(&self, r: Option<RequestMark>, f: impl FnOnce(&mut RequestSeen)) {
        let Some(r) = r else { return };
        let mut b = self.book();
        if b.generation == r.generation {
            if let Some(s) = b.requests.get_mut(r.index) {
                f(s);
            }
        }
    }

    /// Everything since the last take; the log starts afresh. Connections still open carry on
    /// being recorded only for requests they get after this (as new entries of a run that
    /// reuses them, they are not known: their requests are dropped).
    pub fn take(&self) -> Seen {
        let mut b = self.book();
        b.generation += 1;
        Seen {
            conns: std::mem::take(&mut b.conns),
            requests: std::mem::take(&mut b.requests),
            dropped: std::mem::take(&mut b.dropped),
        }
    }
}

/// A request being answered: writes its outcome into the log when the answer ends, however
/// it ends (a body dropped half way is an incomplete one).
pub struct Answering {
    log: Arc<TruthLog>,
    mark: Option<RequestMark>,
    pub bytes: u64,
    pub complete: bool,
}

impl Answering {
    pub fn new(log: Arc<TruthLog>, mark: Option<RequestMark>) -> Self {
        Self {
            log,
            mark,
            bytes: 0,
            complete: false,
        }
    }

    pub fn is_kept(&self) -> bool {
        self.mark.is_some()
    }

    pub fn head(&self, status: u16) {
        self.log.head(self.mark, status, Instant::now());
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.log
            .done(self.mark, self.bytes, self.complete, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    #[test]
    fn off_until_enabled_and_afresh_after_take() {
        let log = Arc::new(TruthLog::default());
        let t0 = Instant::now();
        assert!(log.connection(peer(), Some(&[0xab, 0x01]), t0).is_none());
        log.enable();
        let c = log.connection(peer(), Some(&[0xab, 0x01]), t0);
        log.handshake(c, t0);
        let r = log.request(c, "/bytes/5", t0);
        {
            let mut a = Answering::new(log.clone(), r);
            a.head(200);
            a.bytes = 5;
            a.complete = true;
        }
        let cut = log.request(c, "/bytes/9", t0);
        drop(Answering::new(log.clone(), cut));
        let seen = log.take();
        assert_eq!(seen.conns.len(), 1);
        assert!(seen.conns[0].handshake.is_some() && seen.conns[0].quic);
        assert_eq!(seen.conns[0].odcid.as_deref(), Some("ab01"));
        assert_eq!(seen.requests.len(), 2);
        let (a, b) = (&seen.requests[0], &seen.requests[1]);
        assert_eq!((a.status, a.body_bytes, a.complete), (200, 5, true));
        assert!(a.head.is_some() && a.last.is_some());
        assert_eq!((b.status, b.complete), (0, false));
        // The connection belongs to the run before: nothing of it reaches the next.
        assert!(log.request(c, "/bytes/1", t0).is_none());
        log.handshake(c, t0);
        assert!(log.take().conns.is_empty());
    }

    #[test]
    fn bounded() {
        let log = TruthLog::default();
        log.enable();
        let t0 = Instant::now();
        for _ in 0..MAX_CONNECTIONS + 3 {
            log.connection(peer(), None, t0);
        }
        let seen = log.take();
        assert_eq!((seen.conns.len(), seen.dropped), (MAX_CONNECTIONS, 3));
    }
}
