//! The lifecycle every measuring command shares (`qbench`, `compare`, `compete`): the link,
//! cgroup and servers are built first (building them moves this thread into the client's
//! namespace, where the runtime's threads must start), then the client's runtime; the work
//! races the stopping signals; then the runtime is shut down and everything torn down, in
//! that order, however the work ended.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use crate::observe::Observing;
use crate::plan::config::Config;
use crate::setup::prepare::Prepared;
use crate::signals::{counted, ending, untaken, Interrupted};

/// How long a second stopping signal lets the work write the report of the runs it finished.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// Runs `work` on a client runtime of `threads` workers, with `cfgs`' links and servers up,
/// reporting to `observer`.
/// Before `work` sets its flag (it takes signals itself), a stopping signal (SIGINT, SIGTERM,
/// SIGHUP) drops everything; after, `work` takes the first one itself and still writes its
/// report, and a second one drops everything once `work` had `LAST_WORDS` to write what it
/// has (a third, at once). A signal that nobody took, such as one during
/// the teardown, is the caller's to act on (`late_signal`).
pub(crate) fn lifecycle<T>(
    cfgs: &[&Config],
    threads: u32,
    observer: &Observing,
    work: impl AsyncFnOnce(&Prepared, &AtomicBool) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let prepared = Prepared::new(cfgs, observer)?;
    let rt = runtime(threads, prepared.cpu.as_ref())?;
    let started = AtomicBool::new(false);
    let outcome = rt.block_on(async {
        let mut work = std::pin::pin!(work(&prepared, &started));
        let sig = tokio::select! {
            r = &mut work => return r,
            sig = ending(&started) => sig,
        };
        let took = started.load(std::sync::atomic::Ordering::SeqCst);
        if took {
            // The work heard this second signal too: it drops the run in flight and writes
            // the report of those before it, given `LAST_WORDS`. A third signal cuts that.
            tokio::select! {
                r = &mut work => return r,
                () = tokio::time::sleep(LAST_WORDS) => {}
                _ = counted(3) => {}
            }
        }
        crate::signals::take();
        // The first signal before the work took signals ended everything before it ran; a
        // second one, whatever the work had done.
        Err(match took {
            true => Interrupted::new(sig, "again, before the report was written"),
            false => Interrupted::before_work(sig, "before the runs began"),
        }
        .into())
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(prepared);
    // What the connections logged after the last run (their closing) is written too.
    qbench_stack::qlog::flush_all();
    outcome
}

/// A stopping signal the work did not take (it came after the work's last look, as during
/// the teardown): the caller still ends with it, so that it is never ignored.
pub(crate) fn late_signal() -> Result<(), Interrupted> {
    match untaken() {
        Some(sig) => {
            crate::signals::take();
            Err(Interrupted::new(sig, "while tearing down"))
        }
        None => Ok(()),
    }
}

/// The client's tokio runtime. One worker means the calling thread itself: with a separate
/// worker, every object completion would wake the thread blocked in `block_on` across threads
/// (a futex round trip each), which cost a quarter of the CPU on small-object workloads.
/// With `cpu`, every runtime thread and the calling one run under its quota and cpuset.
pub(crate) fn runtime(
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
