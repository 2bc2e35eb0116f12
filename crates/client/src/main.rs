use std::process::ExitCode;

// See the `jemalloc` feature in Cargo.toml for why.
#[cfg(feature = "jemalloc")]
qbench_stack::jemalloc!();

use clap::{CommandFactory, Parser};
use qbench::commands::run::benchmark;
use qbench::flags::cli::{Cli, Command};

fn main() -> ExitCode {
    qbench_stack::rep_movsb::at_start_or_exit();
    qbench_server::standalone::unset_empty_env();
    let cli = Cli::parse();
    qbench_stack::heap::keep_freed_memory();
    // Many connections need many descriptors; a failure only matters if they run out.
    let _ = qbench_stack::fdlimit::raise_fd_limit();
    let result = match cli.command {
        Some(Command::Serve(s)) => qbench::commands::serve::serve(s),
        Some(Command::Proxy(p)) => qbench::commands::proxy::proxy(*p),
        Some(Command::Compare(c)) => qbench::commands::compare::command(*c),
        Some(Command::Sweep(s)) => qbench::commands::sweep::sweep(s),
        Some(Command::Report(r)) => qbench::commands::report::report(r),
        Some(Command::Compete(c)) => qbench::commands::compete::compete(*c),
        Some(Command::Cost(c)) => qbench::commands::cost::cost(c),
        Some(Command::Merge(m)) => qbench::commands::merge::merge(m),
        Some(Command::Diff(d)) => qbench::commands::diff::diff(d),
        Some(Command::Hgrm(h)) => qbench::commands::hgrm::command(h),
        Some(Command::Completions(c)) => qbench::commands::manuals::completions(c, &Cli::command()),
        Some(Command::Man(m)) => qbench::commands::manuals::man(m, &Cli::command()),
        Some(Command::Schema(s)) => qbench::commands::schema::command(s),
        None => benchmark(cli.run),
    };
    // Outputs written as the run went that lost lines fail the command, report or not.
    let result = result.and_then(|()| qbench_engine::files::check_lost());
    qbench::console::exit_if_closed();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            qbench::tell!("error: {}", qbench_core::errors::one_line(e.as_ref()));
            // Bad input exits as clap's own usage errors do.
            if e.chain()
                .any(|c| c.is::<qbench::flags::gate::ThresholdsFailed>())
            {
                ExitCode::from(qbench::flags::gate::THRESHOLD_EXIT)
            } else if e
                .chain()
                .any(|c| c.is::<qbench_engine::error::ConfigError>())
                || qbench_server::standalone::is_bad_input(&e)
            {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
