use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use qbench::app::runtime;
use qbench::cli::{Cli, Command};
use qbench::config::Config;
use qbench::prepare::Prepared;

fn benchmark(args: qbench::cli::RunArgs) -> anyhow::Result<()> {
    let cfg = Config::from_args(args)?;
    if let (true, Some(link), Some(opts)) = (cfg.dry_run, &cfg.link, &cfg.link_options) {
        let (backend, script) = qbench_shaper::topology::dry_run(link, opts);
        println!("# backend: {backend:?}\n{script}");
        return Ok(());
    }
    // The link and server come first: building them moves this thread into the client
    // namespace, where the runtime's threads must be created.
    let prepared = Prepared::new(&[&cfg])?;
    let rt = runtime(cfg.client_threads)?;
    let command: Vec<String> = std::env::args().collect();
    let outcome = rt.block_on(async {
        tokio::select! {
            r = qbench::app::run(cfg, command, &prepared) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    drop(prepared);
    match outcome?.error {
        Some(e) => Err(anyhow::anyhow!(e)),
        None => Ok(()),
    }
}

fn compare(args: qbench::cli::CompareArgs) -> anyhow::Result<()> {
    let plan = qbench::compare::Plan::from_args(args)?;
    let command: Vec<String> = std::env::args().collect();
    match qbench::compare::run_blocking(&plan, command)?.1 {
        Some(e) => Err(anyhow::anyhow!(e)),
        None => Ok(()),
    }
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
        Some(Command::Compare(c)) => compare(*c),
        Some(Command::Sweep(s)) => qbench::sweep::sweep(s),
        Some(Command::Report(r)) => qbench::report::report(r),
        Some(Command::Compete(c)) => qbench::compete::compete(*c),
        Some(Command::Cost(c)) => qbench::cost::cost(c),
        None => benchmark(cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
