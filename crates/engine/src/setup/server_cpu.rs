//! `--server-cpu`: the in-process server's runtime threads, and only those, get a share of a
//! core in slices (the sender time-sliced, as on a busy VM host), by a CFS quota of a cgroup
//! they join as they start, or by the deadline scheduler on each of them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use qbench_core::spec::cpulimit::Throttling;
use qbench_core::spec::server_cpu::{ServerCpu, ServerCpuRecord, Slicer};
use qbench_server::ThreadHook;
use qbench_shaper::cgroup::{self, CpuCgroup};

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// What a server thread does as it starts; apart from the cgroup's owner, so that a thread
/// outliving the server cannot keep the cgroup alive.
struct Joiner {
    cgroup_threads: Option<PathBuf>,
    /// Each thread's deadline runtime and period, in ns.
    deadline: Option<(u64, u64)>,
    joined: AtomicUsize,
    tids: Mutex<Vec<i32>>,
    failed: Mutex<Option<String>>,
}

impl Joiner {
    fn join_current(&self) {
        let tid = gettid();
        let result = match (&self.cgroup_threads, self.deadline) {
            (Some(path), _) => std::fs::write(path, tid.to_string()).with_context(|| {
                format!(
                    "--server-cpu: moving a server thread into {}",
                    path.display()
                )
            }),
            (None, Some((runtime, period))) => {
                qbench_shaper::deadline::set_current(runtime, period).context("--server-cpu")
            }
            (None, None) => Ok(()),
        };
        match result {
            Ok(()) => {
                self.tids
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(tid);
                self.joined.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => {
                let mut slot = self.failed.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(format!("{e:#}"));
            }
        }
    }
}

/// The limit of one in-process server; it must outlive the server's threads.
pub(crate) struct ServerCpuLimit {
    limit: ServerCpu,
    workers: usize,
    cgroup: Option<CpuCgroup>,
    joiner: Arc<Joiner>,
}

impl ServerCpuLimit {
    /// A cgroup with the quota set (CFS), or the runtime each of `workers` threads will take
    /// (deadline); nothing is limited until the threads start.
    pub(crate) fn new(limit: ServerCpu, workers: usize) -> anyhow::Result<Self> {
        let cgroup = match limit.sched {
            Slicer::Cfs => {
                let probe = cgroup::probe().context("--server-cpu")?;
                let cg = CpuCgroup::create(&probe).context("--server-cpu: creating the cgroup")?;
                cg.set_quota(Some((limit.quota_us(), limit.period_us)))
                    .context("--server-cpu: setting the quota")?;
                Some(cg)
            }
            Slicer::Deadline => None,
        };
        let deadline = (limit.sched == Slicer::Deadline)
            .then(|| (limit.runtime_ns(workers), limit.period_us * 1000));
        let joiner = Arc::new(Joiner {
            cgroup_threads: cgroup.as_ref().map(CpuCgroup::threads_path),
            deadline,
            joined: AtomicUsize::new(0),
            tids: Mutex::new(Vec::new()),
            failed: Mutex::new(None),
        });
        Ok(Self {
            limit,
            workers: workers.max(1),
            cgroup,
            joiner,
        })
    }

    pub(crate) fn hook(&self) -> ThreadHook {
        let joiner = self.joiner.clone();
        Arc::new(move || joiner.join_current())
    }

    /// Once the server has started: every worker thread took the limit, or the first that
    /// could not says why. The runtime starts its workers as it is built, but each runs its
    /// start hook on its own.
    pub(crate) fn confirm(&self) -> anyhow::Result<()> {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(e) = super::client_cpu::take_failure(&self.joiner.failed) {
                anyhow::bail!(e);
            }
            if self.joiner.joined.load(Ordering::SeqCst) >= self.workers {
                return Ok(());
            }
            if Instant::now() >= until {
                anyhow::bail!("--server-cpu: the server's threads did not start within 5 s");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub(crate) fn throttling(&self) -> Option<Throttling> {
        self.cgroup.as_ref().map(CpuCgroup::throttling)
    }

    /// What the run ran under, read back from the kernel: `None` when the limit was no
    /// longer in force on every thread that took it.
    pub(crate) fn record(&self, before: Option<&Throttling>) -> Option<ServerCpuRecord> {
        let tids = self
            .joiner
            .tids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (quota_us, period_us, threads) = match &self.cgroup {
            Some(cg) => {
                let (quota, period) = cg.limit().ok()?;
                let inside = cg.threads();
                let held = tids.iter().filter(|t| inside.contains(t)).count();
                (quota?, period, held)
            }
            None => {
                let held: Vec<(u64, u64)> = tids
                    .iter()
                    .filter_map(|&t| qbench_shaper::deadline::of_thread(t))
                    .collect();
                let &(runtime, period) = held.first()?;
                (runtime / 1000, period / 1000, held.len())
            }
        };
        if threads < self.workers {
            return None;
        }
        let throttling = self.throttling().map(|now| match before {
            Some(b) => now.since(b),
            None => now,
        });
        Some(ServerCpuRecord {
            limit: self.limit,
            backend: self.cgroup.as_ref().map(CpuCgroup::backend),
            quota_us,
            period_us,
            threads,
            throttling,
        })
    }
}
