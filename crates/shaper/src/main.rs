use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use qbench_core::link::LinkSpec;
use qbench_shaper::plan::{Names, CLIENT_ADDR, SERVER_ADDR};
use qbench_shaper::topology::{cleanup, dry_run};
use qbench_shaper::{netns, BackendChoice, Offloads, Topology, TopologyOptions};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Emulated links between network namespaces: client <-> router <-> server, with the
/// impairments on the router. Every object it creates is named `qb-...`.
#[derive(Debug, Parser)]
#[command(name = "qbench-shaper", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

// Parsed once per process; boxing the spec would only complicate clap's parser.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Build the link and hold it until SIGINT/SIGTERM (or `down`), then tear it down
    Up {
        /// e.g. rate=100mbit,rtt=36ms,loss=1% (see `qbench --help`, --link)
        spec: LinkSpec,
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        #[arg(long, value_enum, default_value = "default")]
        offloads: Offloads,
        /// Namespace id (hex): namespaces are qb-ID-c, qb-ID-r, qb-ID-s
        #[arg(long, value_parser = parse_id)]
        id: Option<String>,
        /// TCP congestion-window cap in packets on the server's route toward the client
        #[arg(long)]
        tcp_cwnd_cap: Option<u32>,
        /// Print the commands as a shell script instead of running them
        #[arg(long)]
        dry_run: bool,
    },
    /// Tear down the link with this id
    Down {
        #[arg(long, value_parser = parse_id)]
        id: String,
    },
    /// List the links that exist
    Status,
    /// Remove every qb- namespace left behind (e.g. after a killed run); touches nothing else
    Cleanup,
}

fn parse_id(s: &str) -> Result<String, String> {
    if !s.is_empty() && s.len() <= 8 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("1 to 8 hex digits".into())
    }
}

fn ids() -> Vec<String> {
    let mut ids: Vec<String> = netns::list()
        .into_iter()
        .filter(|n| Names::is_ours(n))
        .filter_map(|n| {
            n.strip_prefix("qb-")
                .and_then(|r| r.rsplit_once('-'))
                .map(|(id, _)| id.to_string())
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Cmd::Up {
            spec,
            backend,
            offloads,
            id,
            tcp_cwnd_cap,
            dry_run: dry,
        } => {
            let opts = TopologyOptions {
                backend,
                offloads,
                tcp_cwnd_cap,
                tcp_initial_cwnd: None,
                id,
            };
            if dry {
                let (backend, script) = dry_run(&spec, &opts);
                println!("# backend: {backend:?}\n{script}");
                return Ok(());
            }
            let mut signals =
                Signals::new([SIGINT, SIGTERM]).context("installing signal handlers")?;
            let topo = Topology::up(spec, &opts).context("bringing the link up")?;
            let n = topo.names();
            println!(
                "link up (backend {:?}): client {CLIENT_ADDR} in {}, router {}, server {SERVER_ADDR} in {}",
                topo.backend(),
                n.client,
                n.router,
                n.server
            );
            println!("run programs with `ip netns exec {} ...`; Ctrl-C or `qbench-shaper down --id {}` ends it", n.client, n.id);
            let router = n.router.clone();
            let watch = std::thread::spawn(move || {
                // `down` from another shell deletes the namespaces: notice and exit too.
                while netns::list().contains(&router) {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                let _ = signal_hook::low_level::raise(SIGTERM);
            });
            signals.forever().next();
            drop(topo);
            drop(watch);
            println!("link down");
            Ok(())
        }
        Cmd::Down { id } => {
            let names = Names::new(&id);
            let existing = netns::list();
            anyhow::ensure!(existing.contains(&names.router), "no link with id {id}");
            for c in qbench_shaper::plan::down(&names) {
                qbench_shaper::exec::run(&c)?;
            }
            Ok(())
        }
        Cmd::Status => {
            let ids = ids();
            if ids.is_empty() {
                println!("no links");
            }
            for id in ids {
                let n = Names::new(&id);
                println!("link {id}: {} {} {}", n.client, n.router, n.server);
                let qdisc = std::process::Command::new("tc")
                    .args(["-n", &n.router, "qdisc", "show"])
                    .output();
                if let Ok(o) = qdisc {
                    print!("{}", String::from_utf8_lossy(&o.stdout));
                }
            }
            Ok(())
        }
        Cmd::Cleanup => {
            let removed = cleanup();
            println!(
                "removed {} namespace(s){}",
                removed.len(),
                if removed.is_empty() {
                    String::new()
                } else {
                    format!(": {}", removed.join(" "))
                }
            );
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", qbench_core::errors::one_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
