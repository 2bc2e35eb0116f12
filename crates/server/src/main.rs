use anyhow::Context;
use clap::Parser;
use qbench_server::standalone::{serve_until_signal, CertOut};
use qbench_server::ServerOptions;

/// The matched qbench server: HTTP/3 on UDP and HTTP/2 + HTTP/1.1 on TCP, same port,
/// serving GET /bytes/{n}.
#[derive(Debug, Parser)]
#[command(name = "qbench-server", version)]
struct Cli {
    #[command(flatten)]
    server: ServerOptions,

    #[command(flatten)]
    cert_out: CertOut,
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let result = serve_until_signal(cli.server, &cli.cert_out)
        .await
        .context("qbench-server");
    if let Err(e) = result {
        eprintln!("error: {}", qbench_core::errors::one_line(e.as_ref()));
        std::process::exit(1);
    }
}
