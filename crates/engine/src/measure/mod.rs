//! Measurement of the machine: the monotonic clock, CPU time, the environment a report records.

pub mod clock;
pub mod cpu;
pub mod env;
pub mod netdev;
