//! qbench-engine: what a qbench run does, as a library. Its folders are layers, each using
//! only those below it: `error`, `signals` and `observe` (progress and warnings go to whoever
//! drives the engine: it has no command line and draws nothing); `measure` (the client and the
//! machine); `output` (the files a run streams); `plan` (a validated spec, as data);
//! `transport` (h1, h2 and h3 behind one pair of traits); `drive` (closed and open loops, held
//! loads, video, pages, third-party clients); `setup` (links, servers, cgroups, the start
//! barrier, descriptors, inputs); `session` (a side ready to run, the driver of its runs, and
//! the commands' lifecycles: [`run`], [`compare`] and [`compete`] each take a plan and an observer and
//! return the outcome). `scripts/ci/import_circles.py` keeps it so.

pub mod drive;
pub mod error;
pub mod measure;
pub mod observe;
pub mod output;
pub mod plan;
pub mod session;
pub mod setup;
pub mod signals;
pub mod transport;

pub use session::compare::{compare, CompareOutcome, ComparePlan};
pub use session::compete::{compete, CompetePlan};
pub use session::run::{run, RunOutcome, RunPlan};
