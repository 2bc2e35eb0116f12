//! What a report merged from shards records of them: each shard's file, host and start, and
//! which were missing.

use serde::{Deserialize, Serialize};

use crate::spec::start::StartRecord;

/// One shard as the merged report lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardEntry {
    pub index: u32,
    /// The file it was read from.
    pub file: String,
    pub hostname: Option<String>,
    pub complete: bool,
    /// Why it is incomplete: its first error, or why it stopped.
    pub error: Option<String>,
    /// Its `--start-at` barrier and skew.
    pub start: Option<StartRecord>,
    /// Why its client may have limited it, in any run.
    pub saturated: Option<String>,
}

/// What a merged report was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeInfo {
    /// Shards the workload was split into.
    pub count: u32,
    pub shards: Vec<ShardEntry>,
    /// Shard indices with no report: the merged report is incomplete.
    pub missing: Vec<u32>,
    /// Latest minus earliest wall-clock start of the shards' first runs, microseconds.
    pub start_spread_us: Option<u64>,
}
