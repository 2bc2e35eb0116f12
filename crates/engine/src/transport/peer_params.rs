//! The QUIC server's transport parameters as it sent them. quinn keeps the peer's parameters
//! to itself, so each connection's TLS session is wrapped to keep a copy of the one the
//! report needs: how many request streams the server allows at once.

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quinn_proto::crypto::{
    ClientConfig, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey, Session,
};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};

/// RFC 9000 18.2.
const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
const UNKNOWN: u64 = u64::MAX;

/// Filled in by the connection's TLS session once the server's parameters arrive.
#[derive(Debug)]
pub(crate) struct PeerStreams(AtomicU64);

impl Default for PeerStreams {
    fn default() -> Self {
        Self(AtomicU64::new(UNKNOWN))
    }
}

impl PeerStreams {
    pub(crate) fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&v| v != UNKNOWN)
    }
}

/// A client crypto config that hands each session a place to record the server's limit.
pub(crate) struct Recording {
    pub inner: Arc<dyn ClientConfig>,
    pub seen: Arc<PeerStreams>,
}

impl ClientConfig for Recording {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn Session>, ConnectError> {
        let inner = self
            .inner
            .clone()
            .start_session(version, server_name, params)?;
        Ok(Box::new(RecordingSession {
            inner,
            seen: self.seen.clone(),
        }))
    }
}

struct RecordingSession {
    inner: Box<dyn Session>,
    seen: Arc<PeerStreams>,
}

/// RFC 9000 16: a variable-length integer and the rest of `b`.
fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let v = bytes[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |v, &x| (v << 8) | u64::from(x));
    Some((v, &b[len..]))
}

/// The value of `initial_max_streams_bidi` in encoded transport parameters; absent means 0.
fn max_streams_bidi(mut b: &[u8]) -> Option<u64> {
    while !b.is_empty() {
        let (id, rest) = varint(b)?;
        let (len, rest) = varint(rest)?;
        let len = usize::try_from(len).ok()?;
        let value = rest.get(..len)?;
        if id == INITIAL_MAX_STREAMS_BIDI {
            return varint(value).map(|(v, _)| v);
        }
        b = &rest[len..];
    }
    Some(0)
}

impl Session for RecordingSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }

    /// With 0-RTT the first answer is the remembered parameters; the server's own replace
    /// them when its first flight arrives, so every answer is recorded.
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        let params = self.inner.transport_parameters()?;
        if let Some(p) = &params {
            let mut encoded = Vec::new();
            p.write(&mut encoded);
            if let Some(v) = max_streams_bidi(&encoded) {
                self.seen.0.store(v.min(UNKNOWN - 1), Ordering::Relaxed);
            }
        }
        Ok(params)
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        self.inner.write_handshake(buf)
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_limit_among_other_parameters() {
        // max_idle_timeout (0x01) = 30000, initial_max_streams_bidi (0x08) = 256
        let b = [0x01, 0x04, 0x80, 0x00, 0x75, 0x30, 0x08, 0x02, 0x41, 0x00];
        assert_eq!(max_streams_bidi(&b), Some(256));
        assert_eq!(max_streams_bidi(&b[..6]), Some(0), "absent is zero");
        assert_eq!(max_streams_bidi(&b[..8]), None, "truncated");
    }

    proptest! {
        #[test]
        fn any_bytes_give_a_value_or_none(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = max_streams_bidi(&b);
        }
    }
}
