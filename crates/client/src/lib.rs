//! qbench: the client library behind the `qbench` binary.

pub mod commands;
pub mod console;
pub(crate) mod drive;
pub mod export;
pub mod flags;
pub mod measure;
pub mod plan;
pub mod setup;
mod transport;
