use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use qbench::cli::{Cli, Command};
use qbench::config::Config;

fn runtime(workers: u32) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers as usize)
        .thread_name("qbench-client")
        .enable_all()
        .build()
        .context("starting the client runtime")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Serve(s)) => runtime(2).and_then(|rt| {
            rt.block_on(qbench_server::standalone::serve_until_signal(
                s.server,
                &s.cert_out,
            ))
            .context("qbench serve")
        }),
        None => (|| {
            let cfg = Config::from_args(cli.run)?;
            let rt = runtime(cfg.client_threads)?;
            let command: Vec<String> = std::env::args().collect();
            let outcome = rt.block_on(qbench::app::run(cfg, command))?;
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
            match outcome.error {
                Some(e) => Err(anyhow::anyhow!(e)),
                None => Ok(()),
            }
        })(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
