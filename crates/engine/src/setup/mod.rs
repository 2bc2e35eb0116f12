//! What exists before the runs and around them: links and servers, cgroups, the start barrier, descriptors, inputs.

pub mod client_cpu;
pub mod fds;
pub mod fleet;
pub mod harness;
pub mod input;
pub mod prepare;
