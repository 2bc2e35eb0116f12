//! Where `qbench proxy` relays to: the origin's address and name, the protocol and TLS it
//! is reached with, and how long to wait for it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use qbench_core::Protocol;

use crate::relay_stats::RelayStats;

/// What a proxy relays to, and over what.
pub struct Upstream {
    pub proto: Protocol,
    pub addr: SocketAddr,
    /// The origin's name, for SNI and the requests' authority.
    pub server_name: String,
    /// With the ALPN of `proto`.
    pub tls: Arc<rustls::ClientConfig>,
    /// HTTP/3: the endpoint upstream connections leave from (bound where the caller chose:
    /// with a split topology, in the upstream link's namespace).
    pub endpoint: Option<quinn::Endpoint>,
    /// Opening an upstream connection, and waiting for a response head, gives up after this.
    pub timeout: Duration,
    pub stats: Arc<RelayStats>,
}
