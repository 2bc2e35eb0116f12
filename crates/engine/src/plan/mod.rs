//! One validated plan per command: the configuration of each side and the outputs, as data.

pub(crate) mod apps;
pub(crate) mod client_cpu;
pub(crate) mod config;
pub(crate) mod outputs;
pub(crate) mod server_program;
pub(crate) mod target;
pub(crate) mod third_party;

pub use apps::check as check_apps;
pub use client_cpu::cores;
pub use config::{check_telemetry, Config, LinkChoice, TargetArgs};
pub use outputs::Outputs;
