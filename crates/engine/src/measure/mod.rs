//! Measurement of the machine: the monotonic clock, CPU time, the environment a report records.

pub(crate) mod clock;
pub(crate) mod cpu;
pub(crate) mod env;
pub(crate) mod net_counters;
pub(crate) mod netdev;
