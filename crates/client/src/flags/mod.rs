//! How the user spells things: the command line's flags and how they become typed specs (and back, for `rerun`).

pub mod apps;
pub mod chain;

pub mod cli;
pub mod contestant;
pub mod fleet;
pub mod gate;
pub mod inputs;
pub mod judge;
pub mod link;
pub mod load;
pub mod refused;
pub mod rerun;
pub mod serve;
pub mod side;
pub mod sweep;
pub mod tools;
pub(crate) mod values;
