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
use qbench_shaper::affinity::gettid;
use qbench_shaper::cgroup::{self, CpuCgroup};
use qbench_shaper::steal::Stealer;

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
            (Ok(()), Some(cpu)) => qbench_shaper::affinity::pin_current(&[cpu])
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
    /// Steal: what takes the server's CPU (one for every server of the command), and that CPU.
    stealer: Option<Shared>,
    joiner: Arc<Joiner>,
}

/// The stealing thread every stolen server of a command shares, the CPU it takes, and the
/// limit it was started for.
pub(crate) type Shared = (Arc<Stealer>, u16, ServerCpu);

/// The stealer of `limit`, started paused, or `shared`'s when one was (a comparison's sides
/// and a competition's flows each have a server, and one CPU is taken for all of them).
pub(crate) fn stealer(
    limit: ServerCpu,
    client_cpus: &[u16],
    shared: &mut Option<Shared>,
) -> anyhow::Result<Option<Shared>> {
    if limit.sched != Slicer::Steal {
        return Ok(None);
    }
    if let Some(s) = shared {
        anyhow::ensure!(
            s.2 == limit,
            "--server-cpu steal: one CPU is taken for every server, so every side needs the same limit"
        );
        return Ok(Some(s.clone()));
    }
    let cpu = crate::plan::client_cpu::steal_cpu(client_cpus).context("--server-cpu")?;
    let period = Duration::from_micros(limit.period_us);
    let busy = period.saturating_sub(Duration::from_micros(limit.quota_us()));
    let s = Stealer::start(cpu, busy, period).context("--server-cpu steal")?;
    *shared = Some((Arc::new(s), cpu, limit));
    Ok(shared.clone())
}

impl ServerCpuLimit {
    /// A cgroup with the quota set (CFS), the runtime each of `workers` threads will take
    /// (deadline), or the stealing thread running (steal); the server's threads take the
    /// limit as they start.
    pub(crate) fn new(
        limit: ServerCpu,
        workers: usize,
        stealer: Option<Shared>,
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
        let deadline = (limit.sched == Slicer::Deadline)
            .then(|| (limit.runtime_ns(workers), limit.period_us * 1000));
        let joiner = Arc::new(Joiner {
            cgroup_threads: cgroup.as_ref().map(CpuCgroup::threads_path),
            deadline,
            cpu: stealer.as_ref().map(|s| s.1),
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

    /// Steal: this side's run wants the CPU taken (from the next period on) until `pause`.
    pub(crate) fn resume(&self) {
        if let Some((s, ..)) = &self.stealer {
            s.resume();
        }
    }

    pub(crate) fn pause(&self) {
        if let Some((s, ..)) = &self.stealer {
            s.pause();
        }
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

    /// Steal: the stealing thread's CPU so far, which is this process's but neither the
    /// client's nor the server's.
    pub(crate) fn stealer_cpu(&self) -> Option<qbench_core::CpuTimes> {
        let (s, ..) = self.stealer.as_ref()?;
        // Its faults and switches are not counted: none are taken from the client's.
        Some(qbench_core::CpuTimes {
            user_s: s.stolen().cpu_ns as f64 / 1e9,
            sys_s: 0.0,
            minor_faults: Some(0),
            voluntary_switches: Some(0),
            involuntary_switches: Some(0),
        })
    }

    /// CFS: the cgroup's throttling; steal: the periods taken and the time taken in them.
    pub(crate) fn throttling(&self) -> Option<Throttling> {
        if let Some((s, ..)) = &self.stealer {
            // The time taken is the stealing thread's own CPU time: what it had, not what it
            // asked for.
            let t = s.stolen();
            return Some(Throttling {
                periods: t.periods,
                throttled_periods: t.periods,
                throttled_us: t.cpu_ns / 1000,
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
            (None, Some((stealer, cpu, _))) => {
                if !stealer.running() {
                    return None;
                }
                let on = |t: i32| qbench_shaper::affinity::of_thread(t) == [*cpu];
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
            cpu: self.stealer.as_ref().map(|s| s.1),
            backend: self.cgroup.as_ref().map(CpuCgroup::backend),
            quota_us,
            period_us,
            threads,
            throttling,
        })
    }
}
