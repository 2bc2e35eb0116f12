//! One validated plan per command: the configuration of each side, the outputs, and a side ready to run.

pub mod apps;
pub mod client_cpu;
pub mod config;
pub mod driver;
pub mod error;
pub mod outputs;
pub mod side;
pub mod third_party;
