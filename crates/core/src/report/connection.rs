//! One connection of a run as its report records it: what its handshake negotiated, when,
//! and what it carried.

use serde::{Deserialize, Serialize};

use crate::errors::ErrorKind;

/// What the handshake negotiated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HandshakeInfo {
    pub alpn: Option<String>,
    /// The client offered a stored TLS session ticket.
    pub resumption_offered: bool,
    /// The server accepted the resumption; `None` where the stack cannot tell (quinn without 0-RTT).
    pub resumed: Option<bool>,
    /// 0-RTT data was sent and accepted by the server.
    pub early_data_accepted: bool,
    /// The client's port of this connection: its TCP port (h1, h2) or the UDP port of the QUIC
    /// endpoint it was opened on (h3, one endpoint per connection), so that a reader sees how
    /// many sockets the client's connections went through.
    #[serde(default)]
    pub local_port: Option<u16>,
}

/// One connection as it appears in the report. Times are microseconds since the run started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConnectionRecord {
    pub started_us: u64,
    /// Connect + TLS (h1/h2), or (h3) the client's QUIC handshake complete: the server's
    /// Finished in and its own sent, one round trip (not confirmed, which waits for the
    /// server's HANDSHAKE_DONE); with 0-RTT, the server's acceptance known.
    pub handshake_us: Option<u64>,
    #[serde(flatten)]
    pub info: HandshakeInfo,
    pub error: Option<ErrorKind>,
    /// Concurrent request streams the server allows, as it advertised them: h2
    /// SETTINGS_MAX_CONCURRENT_STREAMS, h3 initial_max_streams_bidi. Null for h1, where
    /// the server set no limit, or (h2) where no response arrived.
    #[serde(default)]
    pub server_max_streams: Option<u64>,
    /// The most requests this connection had on the wire at once during the run.
    #[serde(default)]
    pub peak_streams: u64,
    /// What the client's QUIC stack did on this connection during the run (h3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::spec::quic_knobs::QuicStats>,
    /// Opened in place of a connection that closed while requests were waiting for it: the
    /// server's request limit (GOAWAY, `Connection: close`), or an end without a word (an
    /// idle timeout, a reset).
    #[serde(default)]
    pub reopened: bool,
}
