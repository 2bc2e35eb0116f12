//! Measurement of the machine: the monotonic clock, CPU time, the environment a report records.

pub(crate) mod clock;
pub mod cpu;
pub(crate) mod env;
