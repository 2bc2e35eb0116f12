//! What `qbench proxy` carried, counted as it goes and said when it stops.

use std::sync::atomic::{AtomicU64, Ordering};

/// What the proxy carried, per direction.
#[derive(Debug, Default)]
pub struct RelayStats {
    pub requests: AtomicU64,
    /// Upstream connections opened, and those that failed to open.
    pub connects: AtomicU64,
    pub connect_failures: AtomicU64,
    /// Request heads sent upstream (their header bytes: requests carry no body upstream).
    pub bytes_up: AtomicU64,
    /// Response body bytes relayed from the origin to clients.
    pub bytes_down: AtomicU64,
    /// Responses that ended early because the upstream stream broke, or whose body was not
    /// the length the origin announced.
    pub broken: AtomicU64,
    /// Requests answered by the proxy itself with 502, 504 or 508: the origin could not be
    /// reached, did not answer in time, or the request had been through this proxy already.
    pub failed: AtomicU64,
    /// Upstream connections opened again because the previous one had closed.
    pub reopened: AtomicU64,
}

impl RelayStats {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}
