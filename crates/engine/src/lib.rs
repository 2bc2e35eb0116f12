//! qbench-engine: what a qbench run does, as a library. Its folders are layers, each using
//! only those below it: `error`, `signals` and `observe` (progress and warnings go to whoever
//! drives the engine: it has no command line and draws nothing); `measure` (the client and the
//! machine); `output` (the files a run streams); `plan` (a validated spec, as data);
//! `transport` (h1, h2 and h3 behind one pair of traits); `drive` (closed and open loops, held
//! loads, video, pages, third-party clients); `setup` (links, servers, cgroups, the start
//! barrier, descriptors, inputs); `session` (a side ready to run, the driver of its runs, and
//! the commands' lifecycles: [`run`], [`compare`], [`compete`] and [`sweep`] each take a plan
//! and an observer and return the outcome). `scripts/ci/import_circles.py` keeps it so.
//!
//! What a command line sees is small: the entry points and their plans at the root, `plan`
//! (a side's validated configuration), `observe` (the observer and presenter a command gives
//! the engine), `error`, `signals`, and three facades over private folders: `files` (inputs
//! and outputs the user names), `tls` and `cpu`. Every other module is the crate's own.

mod drive;
pub mod error;
mod measure;
pub mod observe;
mod output;
pub mod plan;
mod session;
mod setup;
pub mod signals;
mod transport;

pub use session::compare::{compare, CompareOutcome, ComparePlan, DEFAULT_WARMUP_ROUNDS};
pub use session::compete::{compete, CompetePlan};
pub use session::run::{run, RunOutcome, RunPlan};
pub use session::sweep::{sweep, CellPlan, CellStage, SweepOutcome, SweepPlan, SweepPresenter};
pub use setup::fds::check as check_descriptors;
pub use setup::fleet::Barrier;
pub use transport::received::body_bytes_received;

/// Files the user names: inputs read with their caps; outputs checked before the first run
/// and written without replacing what the user owns; streams; outputs that lost a write.
pub mod files {
    pub use crate::output::lost::{check as check_lost, check_key_log, record as record_lost};
    pub use crate::output::overwrite::check_not_inputs;
    pub use crate::output::target::{identity, open_stream, resolve, write_file, Target};
    pub use crate::output::{check_writable, replace_atomically};
    pub use crate::setup::input::{read_bytes, read_text};
}

/// The client's TLS, for a command that connects as qbench's clients do (`qbench proxy`, the
/// raw baselines): the configuration, the trust it is built on, and `--keylog`.
pub mod tls {
    pub use crate::transport::tls::{client_config, open_key_log, ClientTlsError, Trust};
}

/// CPU time: the process's, and the busiest thread's as a live view shows it.
pub mod cpu {
    pub use crate::measure::cpu::{process_cpu, BusiestThread};
}
