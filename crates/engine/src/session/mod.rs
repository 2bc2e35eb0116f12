//! A side ready to run and the driver of its runs: where a plan, the transports, the drivers
//! and what was set up around them meet, above every other folder of the engine; and the
//! lifecycle of each command from its plan to its report (`run`, `compare`, `compete`, `sweep`).

pub(crate) mod compare;
mod compare_plan;
pub(crate) mod compete;
pub(crate) mod driver;
mod early_stop;
mod meta;
mod recalibrate;
mod rounds;
pub(crate) mod run;
mod served;
pub(crate) mod side;
pub(crate) mod sweep;
mod third_party_side;
