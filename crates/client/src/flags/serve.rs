//! `qbench serve` and the server half of `qbench proxy` take the matched server's own flags,
//! as `qbench-server` spells them.

pub use qbench_server::cli::Serve as ServeArgs;
