//! A QUIC client's qlog (JSON-SEQ, as ngtcp2's example client writes it with `--qlog-dir`):
//! the client's own account of one connection, for a client that prints no timings.
//!
//! Times are the qlog's, milliseconds since its reference (the connection's first packet);
//! the reader places them on the run's clock. What is taken:
//! - the first packet sent and the first received (one round trip plus the server's turn);
//! - the handshake: the first Handshake-space packet the client sends with CRYPTO data, i.e.
//!   its Finished, sent once the server's flight is in (curl's `time_appconnect`, quic-go's
//!   `HandshakeComplete`);
//! - per stream: the first STREAM frame sent (the request), the first received (the
//!   response head), and the moment every byte up to the FIN is in. Under loss that is when
//!   the last hole is filled, not when the FIN first arrives.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Largest qlog read, per connection: a 10 MB object over 1200-byte packets logs about
/// 5 MB.
pub const MAX_QLOG: usize = 256 * 1024 * 1024;

/// Streams tracked per connection; a qlog naming more is refused.
pub const MAX_STREAMS: usize = 100_000;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct QlogConn {
    /// The Destination Connection ID of the client's first Initial (the trace's group id),
    /// as lowercase hex: the server sees it as the original destination CID.
    pub odcid: Option<String>,
    pub first_sent_ms: Option<f64>,
    pub first_received_ms: Option<f64>,
    pub handshake_ms: Option<f64>,
    /// By stream id.
    pub streams: BTreeMap<u64, QlogStream>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct QlogStream {
    pub first_sent_ms: Option<f64>,
    pub first_received_ms: Option<f64>,
    /// Every byte up to the FIN received.
    pub done_ms: Option<f64>,
    /// Stream bytes received, duplicates once (HTTP/3 framing included).
    pub received: u64,
    fin_at: Option<u64>,
    /// Received ranges, start to end, merged.
    have: BTreeMap<u64, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QlogError {
    #[error("record {record}: {message}")]
    Bad { record: usize, message: String },
    #[error("no qlog header record")]
    NoHeader,
    #[error("more than {MAX_STREAMS} streams")]
    TooManyStreams,
    #[error("stream {stream}: offset {offset} + length {length} overflows")]
    Overflow {
        stream: u64,
        offset: u64,
        length: u64,
    },
}

#[derive(Deserialize)]
struct Header {
    trace: Trace,
}

#[derive(Deserialize)]
struct Trace {
    #[serde(default)]
    common_fields: Option<Common>,
}

#[derive(Deserialize)]
struct Common {
    #[serde(default)]
    group_id: Option<String>,
}

#[derive(Deserialize)]
struct Event {
    time: f64,
    name: String,
    #[serde(default)]
    data: Option<PacketData>,
}

#[derive(Deserialize)]
struct PacketData {
    #[serde(default)]
    frames: Vec<Frame>,
    #[serde(default)]
    header: Option<PacketHeader>,
}

#[derive(Deserialize)]
struct PacketHeader {
    #[serde(default)]
    packet_type: String,
}

#[derive(Deserialize)]
struct Frame {
    frame_type: String,
    #[serde(default)]
    stream_id: Option<u64>,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    length: Option<u64>,
    #[serde(default)]
    fin: bool,
}

/// Parses one connection's qlog. Records are separated by RS (0x1E) and newlines, and counted
/// from 1 (the header); records other than packets sent and received are skipped, but each
/// must be JSON, except a last one cut short.
pub fn parse(text: &str) -> Result<QlogConn, QlogError> {
    let mut out = QlogConn::default();
    let records: Vec<&str> = text
        .split(['\u{1e}', '\n'])
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .collect();
    let first = records.first().ok_or(QlogError::NoHeader)?;
    let header: Header = serde_json::from_str(first).map_err(|_| QlogError::NoHeader)?;
    out.odcid = header
        .trace
        .common_fields
        .and_then(|c| c.group_id)
        .filter(|g| !g.is_empty() && g.len() <= 80 && g.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|g| g.to_ascii_lowercase());
    for (i, rec) in records.iter().enumerate().skip(1) {
        let bad = |message: String| QlogError::Bad {
            record: i + 1,
            message,
        };
        let e: Event = match serde_json::from_str(rec) {
            Ok(e) => e,
            // A client killed mid-write leaves its last record cut short.
            Err(e) if e.is_eof() && i + 1 == records.len() => break,
            Err(e) => return Err(bad(e.to_string())),
        };
        if !e.time.is_finite() || e.time < 0.0 {
            return Err(bad(format!("time {} is not a time", e.time)));
        }
        let sent = match e.name.rsplit(':').next() {
            Some("packet_sent") => true,
            Some("packet_received") => false,
            _ => continue,
        };
        let Some(data) = e.data else { continue };
        let at = Some(e.time);
        if sent {
            out.first_sent_ms = out.first_sent_ms.or(at);
            let handshake = data
                .header
                .as_ref()
                .is_some_and(|h| h.packet_type == "handshake");
            if handshake && data.frames.iter().any(|f| f.frame_type == "crypto") {
                out.handshake_ms = out.handshake_ms.or(at);
            }
        } else {
            out.first_received_ms = out.first_received_ms.or(at);
        }
        for f in data.frames.iter().filter(|f| f.frame_type == "stream") {
            let Some(id) = f.stream_id else { continue };
            if !out.streams.contains_key(&id) && out.streams.len() >= MAX_STREAMS {
                return Err(QlogError::TooManyStreams);
            }
            let s = out.streams.entry(id).or_default();
            if sent {
                s.first_sent_ms = s.first_sent_ms.or(at);
            } else {
                s.first_received_ms = s.first_received_ms.or(at);
                let (offset, length) = (f.offset.unwrap_or(0), f.length.unwrap_or(0));
                let end = offset.checked_add(length).ok_or(QlogError::Overflow {
                    stream: id,
                    offset,
                    length,
                })?;
                s.take(offset, end, f.fin, e.time);
            }
        }
    }
    Ok(out)
}

impl QlogStream {
    /// Marks `[start, end)` received at `at`.
    fn take(&mut self, start: u64, end: u64, fin: bool, at: f64) {
        if fin {
            self.fin_at = Some(end);
        }
        if end > start {
            self.received += end - start - self.overlap(start, end);
            let mut lo = start;
            let mut hi = end;
            // Every range touching [lo, hi) is folded into one.
            let touching: Vec<(u64, u64)> = self
                .have
                .range(..=hi)
                .rev()
                .take_while(|(_, e)| **e >= lo)
                .map(|(s, e)| (*s, *e))
                .collect();
            for (s, e) in touching {
                self.have.remove(&s);
                lo = lo.min(s);
                hi = hi.max(e);
            }
            self.have.insert(lo, hi);
        }
        if self.done_ms.is_none() {
            let whole = match (self.fin_at, self.have.first_key_value()) {
                (Some(0), _) => true,
                (Some(fin), Some((0, e))) => *e >= fin,
                _ => false,
            };
            if whole {
                self.done_ms = Some(at);
            }
        }
    }

    /// Bytes of `[start, end)` already received.
    fn overlap(&self, start: u64, end: u64) -> u64 {
        self.have
            .range(..end)
            .rev()
            .take_while(|(_, e)| **e > start)
            .map(|(s, e)| (*e).min(end) - (*s).max(start))
            .sum()
    }
}

#[cfg(test)]
#[path = "qlog_tests.rs"]
mod tests;
