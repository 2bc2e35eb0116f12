//! `--server-cpu`: the in-process server's runtime threads, and only those, get a share of a
//! core in slices (the sender time-sliced, as on a busy VM host), by a CFS quota of a cgroup
//! they join as they start, by the deadline scheduler on each of them, or by a real-time
//! thread that takes the one CPU they are pinned to for the rest of each period.

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
    /// The CPU the threads are pinned to (steal).
    cpu: Option<u16>,
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
        let result = match (result, self.cpu) {
            (Ok(()), Some(cpu)) => super::client_cpu::pin(&[cpu])
                .with_context(|| format!("--server-cpu: pinning a server thread to CPU {cpu}")),
            (r, _) => r,
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
    /// Steal: what takes the server's CPU, and that CPU.
    stealer: Option<(qbench_shaper::steal::Stealer, u16)>,
    joiner: Arc<Joiner>,
}

/// The CPU a stolen server runs on: the last this process may use that the client is not
/// pinned to.
fn steal_cpu(client_cpus: &[u16]) -> anyhow::Result<u16> {
    crate::plan::client_cpu::allowed_cpus()
        .into_iter()
        .rev()
        .find(|c| !client_cpus.contains(c))
        .context(
            "--server-cpu steal: every CPU this process may use is the client's (--client-cpuset)",
        )
}

impl ServerCpuLimit {
    /// A cgroup with the quota set (CFS), the runtime each of `workers` threads will take
    /// (deadline), or the stealing thread running (steal); the server's threads take the
    /// limit as they start.
    pub(crate) fn new(
        limit: ServerCpu,
        workers: usize,
        client_cpus: &[u16],
    ) -> anyhow::Result<Self> {
        let cgroup = match limit.sched {
            Slicer::Cfs => {
                let probe = cgroup::probe().context("--server-cpu")?;
                let cg = CpuCgroup::create(&probe).context("--server-cpu: creating the cgroup")?;
                cg.set_quota(Some((limit.quota_us(), limit.period_us)))
                    .context("--server-cpu: setting the quota")?;
                Some(cg)
            }
            Slicer::Deadline | Slicer::Steal => None,
        };
        let stealer = match limit.sched {
            Slicer::Steal => {
                let cpu = steal_cpu(client_cpus)?;
                let period = Duration::from_micros(limit.period_us);
                let busy = period.saturating_sub(Duration::from_micros(limit.quota_us()));
                let s = qbench_shaper::steal::Stealer::start(cpu, busy, period)
                    .context("--server-cpu steal")?;
                Some((s, cpu))
            }
            _ => None,
        };
        let deadline = (limit.sched == Slicer::Deadline)
            .then(|| (limit.runtime_ns(workers), limit.period_us * 1000));
        let joiner = Arc::new(Joiner {
            cgroup_threads: cgroup.as_ref().map(CpuCgroup::threads_path),
            deadline,
            cpu: stealer.as_ref().map(|(_, c)| *c),
            joined: AtomicUsize::new(0),
            tids: Mutex::new(Vec::new()),
            failed: Mutex::new(None),
        });
        Ok(Self {
            limit,
            workers: workers.max(1),
            cgroup,
            stealer,
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

    /// CFS: the cgroup's throttling; steal: the periods taken and the time taken in them.
    pub(crate) fn throttling(&self) -> Option<Throttling> {
        if let Some((s, _)) = &self.stealer {
            let t = s.stolen();
            return Some(Throttling {
                periods: t.periods,
                throttled_periods: t.periods,
                throttled_us: t.busy_ns / 1000,
            });
        }
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
        let (quota_us, period_us, threads) = match (&self.cgroup, &self.stealer) {
            (Some(cg), _) => {
                let (quota, period) = cg.limit().ok()?;
                let inside = cg.threads();
                let held = tids.iter().filter(|t| inside.contains(t)).count();
                (quota?, period, held)
            }
            (None, Some((_, cpu))) => {
                let on = |t: i32| crate::plan::client_cpu::cpus_of(t) == [*cpu];
                let held = tids.iter().filter(|&&t| on(t)).count();
                (self.limit.quota_us(), self.limit.period_us, held)
            }
            (None, None) => {
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
            cpu: self.stealer.as_ref().map(|(_, c)| *c),
            backend: self.cgroup.as_ref().map(CpuCgroup::backend),
            quota_us,
            period_us,
            threads,
            throttling,
        })
    }
}
