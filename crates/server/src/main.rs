// See the `jemalloc` feature in Cargo.toml for why.
#[cfg(feature = "jemalloc")]
qbench_stack::jemalloc!();

use anyhow::Context;
use clap::Parser;
use qbench_server::cli::Cli;
use qbench_server::standalone::serve_until_signal;

fn main() {
    // Before the runtime's threads exist: it may start the process again.
    qbench_stack::rep_movsb::at_start_or_exit();
    qbench_server::standalone::unset_empty_env();
    let cli = Cli::parse();
    qbench_stack::heap::keep_freed_memory();
    let result = cli
        .serve
        .threads
        .runtime()
        .context("qbench-server")
        .and_then(|rt| {
            rt.block_on(serve_until_signal(
                cli.serve.server,
                &cli.serve.cert_out,
                None,
            ))
            .context("qbench-server")
        });
    if let Err(e) = result {
        qbench_server::note!("error: {}", qbench_core::errors::one_line(e.as_ref()));
        // Bad input exits as clap's own usage errors do.
        std::process::exit(if qbench_server::standalone::is_bad_input(&e) {
            2
        } else {
            1
        });
    }
}
