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
    /// How its times were placed on the run's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<Anchor>,
}

/// The event by which a process's times were placed on the run's clock, and whose clock
/// timed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnchorEvent {
    /// The client's own clock: times from a CLOCK_MONOTONIC zero it printed (fetch lines'
    /// `monotonic_us`), the run's clock itself.
    ClientMonotonic,
    /// The client's own wall clock (h2load's request log, Chromium's Resource Timing, fetch
    /// lines' `unix_us`), placed by the wall clock qbench read at its spawn. h2load's
    /// connection starts its "time for connect" before its first request.
    ClientWallClock,
    /// The server's clock: its TCP accept of the process's first connection (found by the
    /// client's port). The client's connect (curl's `time_connect`, its ACK sent) is placed a
    /// one-way delay before it, half the round trip the server's kernel measured on that
    /// connection's handshake; its SYN is 1.5 round trips before it.
    ServerTcpAccept,
    /// The server's clock: its taking of the process's first QUIC Initial (found by the
    /// Initial's Destination Connection ID). The Initial's sending (the client's qlog's first
    /// packet) is placed a one-way delay before it, half the client's first round trip by its
    /// qlog.
    ServerQuicInitial,
    /// The process's spawn (qbench's clock): durations laid from there, start-up included,
    /// for want of a server that saw its connection.
    Spawn,
    /// The server's own times: the client reported none.
    Server,
}

/// How a process's times were placed on the run's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Anchor {
    pub event: AnchorEvent,
    /// The one-way delay by which the server's time of the event was moved back to the
    /// client's, in microseconds (`server_tcp_accept`, `server_quic_initial`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way_us: Option<u64>,
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
    /// What the adapter knows of the program that shapes its figures beside the link and the
    /// server (a timer of its own, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ThirdPartyRun {
    /// CPU seconds (user, sys) of all its processes.
    pub fn cpu(&self) -> (f64, f64) {
        self.processes
            .iter()
            .fold((0.0, 0.0), |(u, s), p| (u + p.user_s, s + p.sys_s))
    }
}
