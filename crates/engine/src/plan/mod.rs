//! One validated plan per command: the configuration of each side and the outputs, as data.

pub mod apps;
pub mod client_cpu;
pub mod config;
pub mod outputs;
pub mod third_party;
