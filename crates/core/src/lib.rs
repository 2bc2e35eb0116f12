//! qbench-core: the pure model shared by the qbench client, server and shaper.
//!
//! Nothing here touches sockets, spawns processes or reads a clock: time is passed in.

pub mod bootstrap;
pub mod ccstate;
pub mod cell;
pub mod compare;
pub mod compete;
pub mod connection;
pub mod cost;
pub mod cpu_times;
pub mod cpulimit;
pub mod effect;
pub mod errors;
pub mod hgrm;
pub mod histogram;
pub mod input;
pub mod link;
pub mod link_report;
pub mod load;
pub mod load_report;
pub mod merge;
pub mod merge_check;
pub mod merge_info;
pub mod metric;
pub mod noise;
pub mod nonparam;
pub mod page;
pub mod page_report;
pub mod quic_knobs;
pub mod recorder;
pub mod report;
pub mod rounds;
pub mod saturation;
pub mod scenario;
pub mod schema;
mod serde_ms;
pub mod shard;
pub mod spec;
pub mod start;
pub mod stats;
pub mod telemetry;
pub mod units;
pub mod video;
pub mod wire;
pub mod workload;

pub use errors::{ErrorCounts, ErrorKind};
pub use histogram::{HistogramExport, LatencyHistogram, PercentileSummary};
pub use recorder::{HandshakeInfo, ObjectOutcome, Recorder};
pub use report::{
    CpuTimes, Environment, Report, ReportMeta, RunCpu, RunReport, SocketCalls, Summary, ToolInfo,
};
pub use stats::Stats;
pub use units::{ByteSize, Rate};
pub use wire::{CcAlgo, Protocol};
pub use workload::Workload;
