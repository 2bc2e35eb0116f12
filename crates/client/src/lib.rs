//! qbench: the command line over `qbench-engine`: its flags, one module per subcommand, the
//! exporters that draw reports, and the console.

pub mod commands;
pub mod console;
pub mod export;
pub mod flags;
