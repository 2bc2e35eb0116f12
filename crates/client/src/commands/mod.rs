//! The subcommands, one file each: its arguments and its run.

pub mod compare;
pub mod compete;
pub mod cost;
pub mod diff;
pub mod hgrm;
pub mod manuals;
pub mod merge;
pub mod proxy;
pub mod report;
mod report_file;
pub mod run;
mod run_outputs;
pub mod schema;
pub mod serve;
pub mod sweep;
mod sweep_list;
