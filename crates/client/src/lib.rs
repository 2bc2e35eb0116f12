//! qbench: the client library behind the `qbench` binary.

pub mod app;
pub mod cli;
mod clock;
pub mod compare;
pub mod compete;
pub mod config;
pub mod console;
pub mod cost;
pub mod cpu;
mod env;
pub mod export;
mod fds;
pub mod fleet;
mod hold;
pub mod load_flags;
pub mod merge;
mod pacer;
mod prepare;
mod requests;
pub mod rerun;
mod runner;
mod side;
pub mod sweep;
mod tls;
mod transport;
mod verify;
mod workers;
