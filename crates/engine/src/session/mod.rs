//! A side ready to run and the driver of its runs: where a plan, the transports, the drivers
//! and what was set up around them meet, above every other folder of the engine.

pub mod driver;
pub mod side;
