use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use qbench_core::spec::link::LinkSpec;
use qbench_shaper::cli::{Cli, Cmd};
use qbench_shaper::plan::{Names, CLIENT_ADDR, SERVER_ADDR};
use qbench_shaper::stop::Stop;
use qbench_shaper::topology::dry_run;
use qbench_shaper::{netns, BackendChoice, Offloads, Topology, TopologyOptions};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// `println!` / `eprintln!` that never panic: `up` must take its link down even when the
/// terminal it printed to has closed (SIGHUP).
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
macro_rules! note {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
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

/// The number of link fields that missed their tolerance (`check`), else 0.
fn run(cli: Cli) -> anyhow::Result<usize> {
    match cli.command {
        Cmd::Up {
            spec,
            backend,
            offloads,
            id,
            tcp_cwnd_cap,
            no_calibrate,
            strict_link,
            dry_run: dry,
        } => {
            // Set by a stopping signal, which ends the link's settling and measuring at once.
            let stopped = Arc::new(AtomicBool::new(false));
            let opts = TopologyOptions {
                offloads,
                tcp_cwnd_cap,
                id,
                calibrate: !no_calibrate,
                strict: strict_link,
                stop: Stop::flag(stopped.clone()),
                ..TopologyOptions::plain(backend)
            };
            if dry {
                script(&spec, &opts)
            } else {
                up(spec, &opts, &stopped)
            }
            .map(|()| 0)
        }
        Cmd::Check {
            spec,
            backend,
            offloads,
            json,
            id,
        } => check(spec, backend, offloads, id, json),
        Cmd::Down { id } => down(&id).map(|()| 0),
        Cmd::Status => {
            status();
            Ok(0)
        }
        Cmd::Cleanup { force, ids } => {
            cleanup(qbench_shaper::cleanup::Scope { force, ids });
            Ok(0)
        }
    }
}

/// `up --dry-run`: the commands as a shell script.
fn script(spec: &LinkSpec, opts: &TopologyOptions) -> anyhow::Result<()> {
    let (backend, script) = dry_run(spec, opts).context("--dry-run")?;
    say!("# backend: {backend:?}\n{script}");
    Ok(())
}

/// `up`: builds the link and holds it until a stopping signal, or until `down` from another
/// shell deletes its namespaces.
fn up(spec: LinkSpec, opts: &TopologyOptions, stopped: &Arc<AtomicBool>) -> anyhow::Result<()> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing signal handlers")?;
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stopped.clone()).context("installing signal handlers")?;
    }
    let topo = Topology::up(spec, opts).context("bringing the link up")?;
    let n = topo.names();
    say!(
        "link up (backend {:?}): client {CLIENT_ADDR} in {}, router {}, server {SERVER_ADDR} in {}",
        topo.backend(),
        n.client,
        n.router,
        n.server
    );
    if let Some(c) = topo.calibration() {
        for m in c.misses() {
            note!("warning: {}", m.line());
        }
        let ok = c.checks.iter().filter(|k| k.ok).count();
        let unmeasurable = c.unmeasurable().count();
        say!(
            "measured in {} ms: {ok} of {} fields within tolerance{} (`qbench-shaper check` prints the table)",
            c.elapsed_ms,
            c.checks.len() - unmeasurable,
            if unmeasurable > 0 {
                format!(", {unmeasurable} not measurable on this link")
            } else {
                String::new()
            }
        );
    }
    say!(
        "run programs with `ip netns exec {} ...`; Ctrl-C or `qbench-shaper down --id {}` ends it",
        n.client,
        n.id
    );
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
    say!("link down");
    Ok(())
}

/// `check`: builds the link, measures it, takes it down and prints asked against measured.
/// Returns the number of fields that missed their tolerance.
fn check(
    spec: LinkSpec,
    backend: BackendChoice,
    offloads: Offloads,
    id: Option<String>,
    json: bool,
) -> anyhow::Result<usize> {
    // A signal ends the settling or the measurement under way at its next poll, then
    // the link is taken down as the topology is dropped.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let opts = TopologyOptions {
        offloads,
        id,
        stop: Stop::flag(stop.clone()),
        ..TopologyOptions::plain(backend)
    };
    let mut topo = Topology::up(spec, &opts).context("bringing the link up")?;
    // Whatever step the signal cut short, it is named as the measurement's is.
    anyhow::ensure!(
        !stop.load(Ordering::Relaxed),
        "stopped by a signal while the link was brought up"
    );
    let backend = topo.backend();
    let c = topo.calibrate()?.clone();
    drop(topo);
    anyhow::ensure!(
        !stop.load(Ordering::Relaxed),
        "stopped by a signal while the link was taken down"
    );
    if json {
        say!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        say!("backend {backend:?}, measured in {} ms", c.elapsed_ms);
        say!("{}", qbench_shaper::check_table::table(&c));
    }
    Ok(c.misses().count())
}

/// `down`: tears down the link with this id.
fn down(id: &str) -> anyhow::Result<()> {
    let names = Names::new(id);
    let existing = netns::list();
    anyhow::ensure!(existing.contains(&names.router), "no link with id {id}");
    for c in qbench_shaper::plan::down(&names) {
        qbench_shaper::exec::run(&c)?;
    }
    Ok(())
}

/// `status`: the links that exist, each with its router's qdiscs.
fn status() {
    let ids = ids();
    if ids.is_empty() {
        say!("no links");
    }
    for id in ids {
        let n = Names::new(&id);
        say!("link {id}: {} {} {}", n.client, n.router, n.server);
        let qdisc = std::process::Command::new("tc")
            .args(["-n", &n.router, "qdisc", "show"])
            .output();
        if let Ok(o) = qdisc {
            print!("{}", String::from_utf8_lossy(&o.stdout));
        }
    }
}

/// `cleanup`: removes what runs left behind, in `scope`, and says what it removed and left.
fn cleanup(scope: qbench_shaper::cleanup::Scope) {
    let list = |v: &[String]| {
        if v.is_empty() {
            String::new()
        } else {
            format!(": {}", v.join(" "))
        }
    };
    let ns = qbench_shaper::cleanup::namespaces(&scope);
    say!(
        "removed {} namespace(s){}",
        ns.removed.len(),
        list(&ns.removed)
    );
    let cg = qbench_shaper::cgroup::cleanup(&scope);
    say!(
        "removed {} cgroup(s){}",
        cg.removed.len(),
        list(&cg.removed)
    );
    let scratch = qbench_shaper::scratch::cleanup(&scope);
    say!(
        "removed {} scratch director{}{}",
        scratch.removed.len(),
        if scratch.removed.len() == 1 {
            "y"
        } else {
            "ies"
        },
        list(&scratch.removed)
    );
    let held: Vec<String> = ns
        .held
        .into_iter()
        .chain(cg.held)
        .chain(scratch.held)
        .collect();
    if !held.is_empty() {
        say!(
            "left {} owned by a live process (--force removes them){}",
            held.len(),
            list(&held)
        );
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(3),
        Err(e) => {
            note!("error: {}", qbench_core::errors::one_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
