//! The lifecycle every measuring command shares (`qbench`, `compare`, `compete`): the link,
//! cgroup and servers are built first (building them moves this thread into the client's
//! namespace, where the runtime's threads must start), then the client's runtime; the work
//! races the stopping signals; then the runtime is shut down and everything torn down, in
//! that order, however the work ended.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::plan::config::Config;
use crate::setup::interrupt::{ending, name};
use crate::setup::prepare::Prepared;

/// Runs `work` on a client runtime of `threads` workers, with `cfgs`' links and servers up.
/// Before `work` sets its flag (its runs have started), a stopping signal (SIGINT, SIGTERM,
/// SIGHUP) drops everything; after, `work` takes the first one itself and still writes its
/// report, and a second one drops everything.
pub fn run<T>(
    cfgs: &[&Config],
    threads: u32,
    work: impl AsyncFnOnce(&Prepared, &AtomicBool) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let prepared = Prepared::new(cfgs)?;
    let rt = runtime(threads, prepared.cpu.as_ref())?;
    let started = AtomicBool::new(false);
    let outcome = rt.block_on(async {
        tokio::select! {
            r = work(&prepared, &started) => r,
            sig = ending(&started) => Err(anyhow::anyhow!("interrupted ({})", name(sig))),
        }
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(prepared);
    // What the connections logged after the last run (their closing) is written too.
    qbench_stack::qlog::flush_all();
    outcome
}

/// The client's tokio runtime. One worker means the calling thread itself: with a separate
/// worker, every object completion would wake the thread blocked in `block_on` across threads
/// (a futex round trip each), which cost a quarter of the CPU on small-object workloads.
/// With `cpu`, every runtime thread and the calling one run under its quota and cpuset.
pub fn runtime(
    workers: u32,
    cpu: Option<&crate::setup::client_cpu::ClientCpu>,
) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match workers {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n as usize);
            b
        }
    };
    if let Some(c) = cpu {
        builder.on_thread_start(c.on_thread_start());
        c.join_current();
    }
    builder
        .thread_name("qbench-client")
        .enable_all()
        .build()
        .context("starting the client runtime")
}
