//! What a third-party client's processes did in a run: the program, its version, how each
//! process ended and what it cost.

use serde::{Deserialize, Serialize};

use crate::client_program::ClientProgram;

/// One process of the client (curl per connection, `exec:` per object with `{url}`...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientProcess {
    pub argv: Vec<String>,
    /// Exit status, when it exited.
    pub exit: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Killed by qbench at `--timeout`.
    pub timed_out: bool,
    /// From spawn to its end.
    pub wall_us: u64,
    /// Its CPU and that of the descendants it waited for (rusage).
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kib: u64,
    /// The last lines of its stderr (at most 2 KiB), when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

/// Where a run's object times came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimingSource {
    /// The client's own per-request timings (curl's `-w`, h2load's log, fetch lines).
    Client,
    /// The client reports none: object times are the server's (request read -> last body
    /// byte handed over), placed on the run's clock.
    Server,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThirdPartyRun {
    pub client: ClientProgram,
    /// What the program says its version is.
    pub version: Option<String>,
    pub timings: TimingSource,
    /// Bodies compared byte for byte with the payload pattern, and those the client kept no
    /// copy of (or that were not asked to be checked).
    pub verified: u64,
    pub unverified: u64,
    pub processes: Vec<ClientProcess>,
}

impl ThirdPartyRun {
    /// CPU seconds (user, sys) of all its processes.
    pub fn cpu(&self) -> (f64, f64) {
        self.processes
            .iter()
            .fold((0.0, 0.0), |(u, s), p| (u + p.user_s, s + p.sys_s))
    }
}
