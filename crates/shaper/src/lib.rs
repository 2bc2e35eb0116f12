//! qbench-shaper: emulated links between network namespaces.
//!
//! LinkSpec -> plan (a pure list of commands) -> executor (runs ip/tc/nft, records what it
//! did) -> `Topology`, an RAII guard over client, router and server namespaces. Kernels
//! without netem get a userspace TUN forwarder for delay, jitter and reordering; high rates on
//! kernels with sch_fq and tc BPF get earliest-departure-time stamps (`edt`).

pub mod affinity;
pub mod calibrate;
pub mod cgroup;
pub mod check_table;
pub mod cleanup;
#[cfg(feature = "cli")]
pub mod cli;
pub mod cmd;
pub mod counters;
pub mod deadline;
pub mod devices;
pub mod drops;
pub mod edt;
pub mod exec;
pub mod forwarder;
pub mod netns;
pub mod owner;
pub mod plan;
pub mod probe;
pub mod qdisc;
pub mod rate;
pub mod scratch;
pub mod settle;
pub mod stamp;
pub mod steal;
pub mod stop;
pub mod topology;
pub mod tun;
mod tun_path;

pub use plan::{Backend, Names, Offloads};
pub use topology::{BackendChoice, LinkReport, Topology, TopologyOptions};
