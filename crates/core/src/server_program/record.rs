//! What a run records of the third-party server that served it.

use serde::{Deserialize, Serialize};

/// One of qbench-server's matched settings that this server could not take, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unmatched {
    /// The setting, as qbench-server has it (e.g. `h2 streams: 100`).
    pub setting: String,
    /// What the server has instead, and why.
    pub instead: String,
}

/// The server program of one run: started before it, stopped after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerRun {
    /// `--server`'s name (`exec` for a template).
    pub name: String,
    /// What the program said of its own version, first line; `None` if it would not say.
    pub version: Option<String>,
    /// Its command line, as run (inside the server's namespace when there is a link).
    pub argv: Vec<String>,
    /// The configuration file qbench wrote for it, whole; `None` where it takes none.
    pub config: Option<String>,
    /// qbench-server's matched settings this server could not take.
    pub unmatched: Vec<Unmatched>,
    /// From spawning it to its listening on every socket the run needs (server's clock).
    pub ready_us: u64,
    /// The CPU of its whole cgroup during the run (from its readiness to its stop), seconds.
    pub user_s: f64,
    pub sys_s: f64,
    /// The peak resident memory of its largest process (VmHWM), KiB.
    pub max_rss_kib: u64,
    /// Its processes when the run ended.
    pub processes: u32,
    /// How it ended: `exit N`, `signal N` (SIGTERM's 15 is the expected end), or `killed`
    /// when it ignored SIGTERM past the grace and was killed.
    pub ended: String,
    /// Its stderr's tail, when it failed or ended unexpectedly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}
