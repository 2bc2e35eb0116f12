use anyhow::Context;
use clap::Parser;
use qbench_server::standalone::{serve_until_signal, Cli};

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    qbench_server::heap::keep_freed_memory();
    let result = serve_until_signal(cli.server, &cli.cert_out, None)
        .await
        .context("qbench-server");
    if let Err(e) = result {
        eprintln!("error: {}", qbench_core::errors::one_line(e.as_ref()));
        std::process::exit(1);
    }
}
