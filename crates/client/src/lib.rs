//! qbench: the client library behind the `qbench` binary.

pub mod app;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod compete;
pub mod config;
pub mod cost;
pub mod env;
pub mod output;
pub mod plot;
pub mod prepare;
pub mod report;
pub mod runner;
pub mod side;
pub mod sweep;
pub mod tls;
pub mod transport;
pub mod verify;
