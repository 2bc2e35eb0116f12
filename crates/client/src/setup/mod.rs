//! What exists before the runs and around them: links and servers, cgroups, the start barrier, descriptors, signals, inputs.

pub mod client_cpu;
pub(crate) mod fds;
pub mod fleet;
pub(crate) mod harness;
pub(crate) mod input;
pub(crate) mod interrupt;
pub(crate) mod prepare;
