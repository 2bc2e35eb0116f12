//! What a replayed page reports beside its page load time: when each dependency level was
//! done, as the browser would have revealed and fetched it.

use serde::{Deserialize, Serialize};

pub use crate::page::PageSpec;

/// One dependency level of a page (0: what the page needs first, n+1: what level n revealed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelRecord {
    pub level: u32,
    pub objects: u64,
    pub bytes: u64,
    /// The level's first request sent and its last object's last byte, from the run's start
    /// (before connecting); `None` if nothing of it was sent or finished.
    pub first_request_us: Option<u64>,
    pub done_us: Option<u64>,
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PageReport {
    /// The HAR file's name (without its directory).
    pub name: String,
    pub objects: u64,
    pub bytes: u64,
    pub origins: u64,
    /// Connections opened per origin, in the profile's origin order.
    pub connections: Vec<u64>,
    pub levels: Vec<LevelRecord>,
}
