//! `raw-transfer`: the ceiling for one connection on loopback, or for N independent ones at
//! once (`--connections N`: each with its own server and client endpoint, runtimes and
//! threads, as N processes would have). Prints one tab-separated line per run (kind, bytes,
//! seconds, Gbit/s, CPU seconds) and the median goodput last.

// qbench's allocator, so that this baseline differs from qbench by qbench's own path alone
// (see the `jemalloc` feature in Cargo.toml; bulk transfers read the same with either).
#[cfg(feature = "jemalloc")]
qbench_stack::jemalloc!();

use anyhow::{Context, Result};
use clap::Parser;
use qbench_benches::baseline::{Baseline, Kind, Outcome};
use qbench_engine::cpu::process_cpu;

/// One stream of server-to-client bulk data with qbench's own stacks and settings, without HTTP.
#[derive(Parser)]
struct Args {
    /// quic: one quinn stream; quic-copy: the same, copying writes; tls-tcp: one tokio-rustls
    /// connection
    #[arg(value_enum)]
    kind: Kind,
    /// Bytes per run (suffixes as in 1GB, 500MB, 64KiB)
    #[arg(long, default_value = "1GB", value_parser = parse_size)]
    bytes: u64,
    /// Runs, each on a fresh connection
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Independent connections at once, each with its own endpoints and threads; each moves
    /// --bytes, and a run's time is the slowest one's
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    connections: u32,
}

fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<qbench_core::units::ByteSize>()
        .map(|b| b.0)
        .map_err(|e| e.to_string())
}

fn main() {
    qbench_stack::rep_movsb::at_start_or_exit();
    // The same copy and allocator settings as qbench's binaries, so the ceiling is like for like.
    qbench_stack::heap::keep_freed_memory();
    if let Err(e) = run(Args::parse()) {
        eprintln!("raw-transfer: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    let baselines = (0..args.connections)
        .map(|_| Baseline::start(args.kind))
        .collect::<Result<Vec<_>>>()?;
    let kind = match args.kind {
        Kind::Quic => "quic",
        Kind::QuicCopy => "quic-copy",
        Kind::TlsTcp => "tls-tcp",
    };
    let name = match args.connections {
        1 => kind.to_string(),
        n => format!("{kind}x{n}"),
    };
    let mut goodputs = Vec::new();
    for i in 0..args.runs {
        let o = at_once(&baselines, args.bytes).with_context(|| format!("run {}", i + 1))?;
        say(&format!(
            "{name}\t{}\t{:.3}\t{:.3}\t{:.3}",
            o.bytes,
            o.elapsed.as_secs_f64(),
            o.goodput_bps() / 1e9,
            o.cpu_s
        ))?;
        goodputs.push(o.goodput_bps());
    }
    goodputs.sort_by(f64::total_cmp);
    say(&format!(
        "median\t{:.3} Gbit/s",
        goodputs[goodputs.len() / 2] / 1e9
    ))
}

/// A line on stdout; a reader that went away is an error, not a panic.
fn say(line: &str) -> Result<()> {
    use std::io::Write;
    writeln!(std::io::stdout(), "{line}").context("writing to stdout")
}

/// One transfer on each baseline, all started together from threads of their own: the bytes
/// of all, the slowest one's time, and the process's CPU over the whole.
fn at_once(baselines: &[Baseline], bytes: u64) -> Result<Outcome> {
    if let [one] = baselines {
        return one.transfer(bytes);
    }
    let go = std::sync::Barrier::new(baselines.len() + 1);
    let cpu0 = process_cpu();
    let each: Vec<Result<Outcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = baselines
            .iter()
            .map(|b| {
                let go = &go;
                s.spawn(move || {
                    go.wait();
                    b.transfer(bytes)
                })
            })
            .collect();
        go.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a transfer thread panicked")))
            })
            .collect()
    });
    let cpu = process_cpu().since(&cpu0);
    let each = each.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(Outcome {
        bytes: each.iter().map(|o| o.bytes).sum(),
        elapsed: each.iter().map(|o| o.elapsed).max().unwrap_or_default(),
        cpu_s: cpu.user_s + cpu.sys_s,
    })
}
