//! Where a run's work went on each side: the threads and sockets it used, and the CPU each
//! kind of thread spent, so a reader sees whether a run measured one socket's path or many,
//! and which part of the process the cores went to.

use serde::{Deserialize, Serialize};

use crate::report::connection::ConnectionRecord;

/// Where a run's work went on each side: its runtime's threads and its transport's sockets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// Client threads that ran the connections: with several, the pinned runtimes' threads (as
    /// many as `--client-threads`, at most one per connection), each with its share of a
    /// closed loop's connections.
    pub client_threads: u32,
    /// Sockets the client's connections went through: the distinct local ports of
    /// `connections` (a TCP socket per h1 or h2 connection, a QUIC endpoint's UDP socket per h3
    /// connection).
    pub client_sockets: u32,
    /// Worker threads of the in-process server's runtime; null for a remote server.
    pub server_threads: Option<u32>,
    /// UDP sockets the in-process server received QUIC on, an endpoint each, in one
    /// SO_REUSEPORT group on its port (0 when it serves no h3); null for a remote server.
    pub server_udp_sockets: Option<u32>,
    /// CPU of this process's threads during the run, by role (from each thread's scheduler
    /// statistics; empty where /proc lacks them). A thread that ended during the run is
    /// missing: its time is in the process totals of `cpu` only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleCpu>,
}

/// What a thread of the qbench process works for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ThreadRole {
    /// The client's runtime (its workers and blocking threads) and the main thread that
    /// drives it.
    Client,
    /// The open-loop pacer thread of earlier versions, read from their reports: the open
    /// loop now paces on the client's own threads.
    Pacer,
    /// The in-process server's runtime, with the proxy's when one runs in the process.
    Server,
    /// The link emulator's userspace forwarders (`--link` with a delay path).
    Link,
    /// Anything else in the process.
    Other,
}

impl ThreadRole {
    /// The role of a thread by the name qbench gives it (`comm`, at most 15 bytes).
    pub fn of(name: &str, is_main: bool) -> Self {
        match name {
            _ if is_main => Self::Client,
            "qbench-client" => Self::Client,
            "qbench-pacer" => Self::Pacer,
            "qbench-server" | "qbench-worker" => Self::Server,
            n if n.starts_with("fwd-") => Self::Link,
            _ => Self::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Pacer => "pacer",
            Self::Server => "server",
            Self::Link => "link",
            Self::Other => "other",
        }
    }
}

/// One role's threads over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoleCpu {
    pub role: ThreadRole,
    /// Threads of this role that were alive at the run's end.
    pub threads: u32,
    /// Their time on a CPU during the run, in seconds.
    pub cpu_s: f64,
    /// The busiest one's share of the run on a CPU (1.0: a whole core all the time).
    pub busiest: f64,
}

impl RoleCpu {
    /// The same roles over several runs: time adds, threads and the busiest share are the
    /// largest seen. Sorted by role.
    pub fn combined<'a>(all: impl IntoIterator<Item = &'a Self>) -> Vec<Self> {
        Self::by_role(all.into_iter().cloned(), u32::max)
    }

    /// One entry per role, sorted: time adds, the busiest share is the largest, and thread
    /// counts meet by `threads` (adding for threads or shards apart, the largest for runs of
    /// one process).
    pub fn by_role(all: impl IntoIterator<Item = Self>, threads: fn(u32, u32) -> u32) -> Vec<Self> {
        let mut out: std::collections::BTreeMap<ThreadRole, Self> = Default::default();
        for r in all {
            match out.entry(r.role) {
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    let o = o.get_mut();
                    o.threads = threads(o.threads, r.threads);
                    o.cpu_s += r.cpu_s;
                    o.busiest = o.busiest.max(r.busiest);
                }
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(r);
                }
            }
        }
        out.into_values().collect()
    }
}

impl Spread {
    /// The spread of shards run at once on many machines: each side's threads and sockets add,
    /// and so does each role's CPU.
    pub fn merged(all: impl IntoIterator<Item = Self>) -> Option<Self> {
        all.into_iter().reduce(|a, b| Self {
            client_threads: a.client_threads + b.client_threads,
            client_sockets: a.client_sockets + b.client_sockets,
            server_threads: a.server_threads.zip(b.server_threads).map(|(x, y)| x + y),
            server_udp_sockets: a
                .server_udp_sockets
                .zip(b.server_udp_sockets)
                .map(|(x, y)| x + y),
            // Shards run on separate machines: their threads add, unlike one process's runs.
            roles: RoleCpu::by_role(a.roles.into_iter().chain(b.roles), u32::saturating_add),
        })
    }

    /// The client's sockets as its connections name them.
    pub fn client_sockets(connections: &[ConnectionRecord]) -> u32 {
        let ports: std::collections::BTreeSet<u16> = connections
            .iter()
            .filter_map(|c| c.info.local_port)
            .collect();
        ports.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(role: ThreadRole, threads: u32, cpu_s: f64, busiest: f64) -> RoleCpu {
        RoleCpu {
            role,
            threads,
            cpu_s,
            busiest,
        }
    }

    #[test]
    fn threads_are_named_to_roles() {
        assert_eq!(ThreadRole::of("anything", true), ThreadRole::Client);
        assert_eq!(ThreadRole::of("qbench-client", false), ThreadRole::Client);
        assert_eq!(ThreadRole::of("qbench-pacer", false), ThreadRole::Pacer);
        assert_eq!(ThreadRole::of("qbench-server", false), ThreadRole::Server);
        assert_eq!(ThreadRole::of("fwd-up-qb0", false), ThreadRole::Link);
        assert_eq!(ThreadRole::of("tokio-runtime-w", false), ThreadRole::Other);
    }

    /// Runs of one process: the CPU adds, the thread count does not.
    #[test]
    fn runs_combine_by_role() {
        let runs = [
            role(ThreadRole::Server, 2, 1.0, 0.5),
            role(ThreadRole::Client, 2, 2.0, 0.9),
            role(ThreadRole::Client, 2, 1.5, 0.95),
        ];
        let c = RoleCpu::combined(&runs);
        assert_eq!(
            c,
            vec![
                role(ThreadRole::Client, 2, 3.5, 0.95),
                role(ThreadRole::Server, 2, 1.0, 0.5)
            ]
        );
    }

    /// Shards on separate machines: threads and CPU both add.
    #[test]
    fn shards_merge_threads_and_cpu() {
        let s = |roles| Spread {
            client_threads: 2,
            client_sockets: 2,
            server_threads: None,
            server_udp_sockets: None,
            roles,
        };
        let m = Spread::merged([
            s(vec![role(ThreadRole::Client, 2, 1.0, 0.4)]),
            s(vec![
                role(ThreadRole::Client, 3, 2.0, 0.6),
                role(ThreadRole::Link, 1, 0.5, 0.5),
            ]),
        ])
        .expect("two");
        assert_eq!(m.client_threads, 4);
        assert_eq!(
            m.roles,
            vec![
                role(ThreadRole::Client, 5, 3.0, 0.6),
                role(ThreadRole::Link, 1, 0.5, 0.5)
            ]
        );
    }
}
