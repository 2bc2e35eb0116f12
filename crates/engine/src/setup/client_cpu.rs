//! `--client-cpu` and `--client-cpuset`: the client's runtime threads, and only those, run
//! under a CFS quota and on chosen CPUs, as a phone's client would (IMC'17 Figures 12-13).
//! The in-process server beside them keeps the whole machine.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use qbench_core::spec::cpulimit::{ClientCpuRecord, CpuSet, Throttling};
use qbench_shaper::affinity::{gettid, pin_current as pin};
use qbench_shaper::cgroup::{self, CpuCgroup};

use crate::plan::config::Config;

/// With `--server-cpu steal:` and no `--client-cpuset`: every CPU but the one taken from the
/// server, so that the client is not paused with it.
fn off_the_stolen_cpu(cfgs: &[&Config]) -> Option<CpuSet> {
    use qbench_core::spec::server_cpu::Slicer;
    let stolen = cfgs
        .iter()
        .filter_map(|c| c.spec().server_cpu)
        .any(|l| l.sched == Slicer::Steal);
    let cpu = crate::plan::client_cpu::steal_cpu(&[])
        .ok()
        .filter(|_| stolen)?;
    let allowed = crate::plan::client_cpu::allowed_cpus();
    CpuSet::of(allowed.into_iter().filter(|&c| c != cpu))
}

/// The first failure a starting thread left, taken so that it is reported once.
pub(crate) fn take_failure(slot: &Mutex<Option<String>>) -> Option<String> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// What a runtime thread does as it starts: join the cgroup, take the cpuset. Kept apart from
/// the cgroup's owner so that a thread outliving the runtime cannot keep the cgroup alive.
struct Joiner {
    threads: Option<PathBuf>,
    cpuset: Option<Vec<u16>>,
    /// The first thread that could not join, reported by the next run.
    failed: Mutex<Option<String>>,
}

impl Joiner {
    fn join_current(&self) {
        let mut result = Ok(());
        if let Some(path) = &self.threads {
            result = std::fs::write(path, gettid().to_string())
                .with_context(|| format!("moving a client thread into {}", path.display()));
        }
        if let (Ok(()), Some(cpus)) = (&result, &self.cpuset) {
            result = pin(cpus).context("--client-cpuset: pinning a client thread");
        }
        if let Err(e) = result {
            let mut slot = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(format!("{e:#}"));
        }
    }
}

/// The quota and pinning of the client's runtime threads, owned by what outlives the runtime.
pub(crate) struct ClientCpu {
    cgroup: Option<CpuCgroup>,
    joiner: Arc<Joiner>,
    cpuset: Option<CpuSet>,
    /// The main thread's CPUs before it was pinned.
    home: Vec<u16>,
}

impl ClientCpu {
    /// For the configurations of one runtime: a cgroup when any sets `--client-cpu`, and the
    /// cpuset they share. `None` when none asks for either.
    pub(crate) fn new(cfgs: &[&Config]) -> anyhow::Result<Option<Self>> {
        let quota = cfgs.iter().any(|c| c.spec().client_cpu.is_some());
        let cpuset = cfgs
            .iter()
            .find_map(|c| c.spec().client_cpuset.clone())
            .or_else(|| off_the_stolen_cpu(cfgs));
        if !quota && cpuset.is_none() {
            return Ok(None);
        }
        let cgroup = match quota {
            true => {
                let probe = cgroup::probe().context("--client-cpu")?;
                Some(CpuCgroup::create(&probe).context("--client-cpu: creating the cgroup")?)
            }
            false => None,
        };
        let joiner = Arc::new(Joiner {
            threads: cgroup.as_ref().map(CpuCgroup::threads_path),
            cpuset: cpuset.as_ref().map(|s| s.cpus().collect()),
            failed: Mutex::new(None),
        });
        Ok(Some(Self {
            cgroup,
            joiner,
            cpuset,
            home: crate::plan::client_cpu::allowed_cpus(),
        }))
    }

    /// The hook every runtime thread runs as it starts.
    pub(crate) fn on_thread_start(&self) -> impl Fn() + Send + Sync + 'static {
        let joiner = self.joiner.clone();
        move || joiner.join_current()
    }

    /// The calling thread (the one that drives `block_on`) joins too, until `self` is dropped.
    pub(crate) fn join_current(&self) {
        self.joiner.join_current();
    }

    /// Sets the quota for the next run (`None`: no quota). A thread that could not join is
    /// an error here, before a run measures a client that is not the one asked for.
    pub(crate) fn apply(&self, fraction: Option<f64>) -> anyhow::Result<()> {
        if let Some(e) = take_failure(&self.joiner.failed) {
            anyhow::bail!(e);
        }
        if let Some(cg) = &self.cgroup {
            cg.set_limit(fraction)
                .context("--client-cpu: setting the quota")?;
        }
        Ok(())
    }

    pub(crate) fn throttling(&self) -> Option<Throttling> {
        self.cgroup.as_ref().map(CpuCgroup::throttling)
    }

    /// What the run ran under, read back from the kernel.
    pub(crate) fn record(
        &self,
        fraction: Option<f64>,
        before: Option<&Throttling>,
    ) -> ClientCpuRecord {
        let cg = self.cgroup.as_ref();
        let limit = cg.and_then(|c| c.limit().ok());
        ClientCpuRecord {
            fraction,
            backend: cg.map(CpuCgroup::backend),
            cgroup: cg.map(|c| c.dir().display().to_string()),
            quota_us: limit.and_then(|(q, _)| q),
            period_us: limit.map(|(_, p)| p),
            cpuset: self.cpuset.clone(),
            threads: cg.map_or(0, |c| c.threads().len()),
            throttling: cg.zip(before).map(|(c, b)| c.throttling().since(b)),
        }
    }
}

/// How a third-party client's process joins the client's limit between fork and exec: the
/// cgroup v1 `cgroup.procs` (its children follow it), and the cpuset.
#[derive(Debug, Clone)]
pub(crate) struct ProcessJoin {
    procs: Option<std::ffi::CString>,
    cpus: Option<Vec<u16>>,
}

impl ProcessJoin {
    /// For the child, between fork and exec: only async-signal-safe calls. A child that
    /// cannot take the limit does not run, so that no run measures an unlimited program.
    pub(crate) fn hook(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let this = self.clone();
        move || {
            if let Some(procs) = &this.procs {
                // SAFETY: open/write/close on a NUL-terminated path the closure owns.
                unsafe {
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let wrote = libc::write(fd, b"0".as_ptr().cast(), 1);
                    let err = std::io::Error::last_os_error();
                    libc::close(fd);
                    if wrote != 1 {
                        return Err(err);
                    }
                }
            }
            match &this.cpus {
                Some(cpus) => pin(cpus),
                None => Ok(()),
            }
        }
    }
}

impl ClientCpu {
    /// What a third-party client's processes join; cgroup v2 keeps the quota to threads of
    /// this process (a threaded cgroup), which `plan` checks before a run is set up.
    pub(crate) fn process_join(&self) -> anyhow::Result<ProcessJoin> {
        let procs = match &self.cgroup {
            Some(c) => {
                anyhow::ensure!(
                    c.backend() == qbench_core::spec::cpulimit::CgroupBackend::CgroupV1,
                    "--client-cpu: a third-party client's processes can join cgroup v1's cpu hierarchy only, and this run's quota is a cgroup v2 one"
                );
                let path = c.dir().join("cgroup.procs");
                Some(
                    std::ffi::CString::new(path.into_os_string().into_encoded_bytes())
                        .context("--client-cpu: the cgroup path has a NUL byte")?,
                )
            }
            None => None,
        };
        Ok(ProcessJoin {
            procs,
            cpus: self.cpuset.as_ref().map(|s| s.cpus().collect()),
        })
    }
}

impl Drop for ClientCpu {
    fn drop(&mut self) {
        // The cgroup's own drop moves every thread still in it (this one too) back.
        if self.cpuset.is_some() {
            let _ = pin(&self.home);
        }
    }
}
