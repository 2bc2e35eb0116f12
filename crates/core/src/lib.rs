//! qbench-core: the pure model shared by the qbench client, server and shaper.
//!
//! Nothing here touches sockets, spawns processes or reads a clock: time is passed in.

pub mod client_program;
pub mod errors;
pub mod hgrm;
pub mod histogram;
pub mod page;
pub mod recorder;
pub mod report;
pub mod scenario;
pub mod schema;
mod serde_ms;
mod serde_str;
pub mod server_program;
pub mod spec;
pub mod stats;
pub mod units;
pub mod video;
pub mod wire;
mod words;

pub use errors::{ErrorCounts, ErrorKind};
pub use histogram::{HistogramExport, LatencyHistogram, PercentileSummary};
pub use recorder::{HandshakeInfo, ObjectOutcome, Recorder};
pub use report::{
    CpuTimes, Environment, Report, ReportMeta, RunCpu, RunReport, SocketCalls, Summary, ToolInfo,
};
pub use spec::workload::Workload;
pub use stats::Stats;
pub use units::{ByteSize, Rate};
pub use wire::{CcAlgo, Protocol};
