//! What exists before the runs and around them: links and servers, cgroups, the start barrier, descriptors, inputs.

pub(crate) mod client_cpu;
pub(crate) mod fds;
pub(crate) mod fleet;
pub(crate) mod harness;
pub(crate) mod input;
pub(crate) mod installed;
pub(crate) mod prepare;
pub(crate) mod proc_group;
pub(crate) mod server_cpu;
pub(crate) mod server_program;
