//! `raw-transfer`: the ceiling for one connection on loopback. Prints one tab-separated line
//! per run (kind, bytes, seconds, Gbit/s, CPU seconds) and the median goodput last.

use anyhow::{Context, Result};
use clap::Parser;
use qbench_benches::baseline::{Baseline, Kind};

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
    let baseline = Baseline::start(args.kind)?;
    let name = match args.kind {
        Kind::Quic => "quic",
        Kind::QuicCopy => "quic-copy",
        Kind::TlsTcp => "tls-tcp",
    };
    let mut goodputs = Vec::new();
    for i in 0..args.runs {
        let o = baseline
            .transfer(args.bytes)
            .with_context(|| format!("run {}", i + 1))?;
        println!(
            "{name}\t{}\t{:.3}\t{:.3}\t{:.3}",
            o.bytes,
            o.elapsed.as_secs_f64(),
            o.goodput_bps() / 1e9,
            o.cpu_s
        );
        goodputs.push(o.goodput_bps());
    }
    goodputs.sort_by(f64::total_cmp);
    println!("median\t{:.3} Gbit/s", goodputs[goodputs.len() / 2] / 1e9);
    Ok(())
}
