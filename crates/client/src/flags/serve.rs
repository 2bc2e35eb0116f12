//! `qbench serve` and the server half of `qbench proxy`: the matched server's flags, its
//! certificate output and its threads.

use clap::Args;
use qbench_server::standalone::{CertOut, Threads};
use qbench_server::ServerOptions;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerOptions,

    #[command(flatten)]
    pub cert_out: CertOut,

    #[command(flatten)]
    pub threads: Threads,
}
