//! qbench-engine: what a qbench run does, as a library. It plans a run from a validated spec
//! (`plan`), sets up what exists around it: links, servers, cgroups, the start barrier,
//! signals (`setup`), drives the load: closed and open loop, held loads, video and pages
//! (`drive`), over h1, h2 and h3 transports (`transport`), measures the client and the machine
//! (`measure`), and writes the outputs a run streams (`output`). It has no command line and
//! draws nothing: progress and warnings go through `observe`, to whoever drives it.

pub mod drive;
pub mod measure;
pub mod observe;
pub mod output;
pub mod plan;
pub mod setup;
pub mod transport;
