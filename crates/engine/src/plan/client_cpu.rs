//! What `--client-cpu` and `--client-cpuset` need of this machine, checked before anything
//! is changed on it: the share within the cores here, the CPUs among those this process may
//! use, and a cgroup this process may create.

use anyhow::Context;
use qbench_core::spec::RunSpec;
use qbench_shaper::cgroup;

use crate::error::{bad, ConfigError};

/// How many cores this process may use (its affinity mask), which bounds `--client-cpu`.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPUs this process may run on.
pub(crate) fn allowed_cpus() -> Vec<u16> {
    qbench_shaper::affinity::of_thread(0)
}

/// The CPU a stolen server runs on: the last this process may use that the client is not
/// pinned to.
pub(crate) fn steal_cpu(client_cpus: &[u16]) -> anyhow::Result<u16> {
    allowed_cpus()
        .into_iter()
        .rev()
        .find(|c| !client_cpus.contains(c))
        .context("steal: every CPU this process may use is the client's (--client-cpuset), none is left to take from the server")
}

/// Bad input before anything is changed on the host: a share above the cores here, CPUs this
/// process may not use, no cgroup cpu controller, or no right to create a cgroup.
pub(crate) fn check(s: &RunSpec) -> Result<(), ConfigError> {
    if let Some(f) = s.client_cpu {
        qbench_core::spec::cpulimit::parse_fraction(&f.to_string(), cores())
            .map_err(|e| bad("--client-cpu", e))?;
        let probe = cgroup::probe().map_err(|e| bad("--client-cpu", e.to_string()))?;
        let parent = std::ffi::CString::new(probe.parent.as_os_str().as_encoded_bytes())
            .map_err(|_| bad("--client-cpu", "the cgroup path has a NUL byte"))?;
        // SAFETY: a valid NUL-terminated path; access() only reads it.
        if unsafe { libc::access(parent.as_ptr(), libc::W_OK) } != 0 {
            return Err(bad(
                "--client-cpu",
                format!(
                    "cannot create a cgroup under {} (needs root, or that cgroup delegated to you)",
                    probe.parent.display()
                ),
            ));
        }
    }
    if let Some(l) = s.server_cpu {
        let workers = s.server_threads as usize;
        l.check(cores(), workers)
            .map_err(|e| bad("--server-cpu", e))?;
        if l.sched == qbench_core::spec::server_cpu::Slicer::Cfs {
            cgroup::probe().map_err(|e| bad("--server-cpu", e.to_string()))?;
        }
        if l.sched == qbench_core::spec::server_cpu::Slicer::Steal {
            let client: Vec<u16> = s.client_cpuset.iter().flat_map(|c| c.cpus()).collect();
            steal_cpu(&client).map_err(|e| bad("--server-cpu", format!("{e:#}")))?;
        }
    }
    if let Some(set) = &s.client_cpuset {
        let allowed = allowed_cpus();
        if let Some(c) = set.cpus().find(|c| !allowed.contains(c)) {
            return Err(bad(
                "--client-cpuset",
                format!("CPU {c} is not one this process may run on"),
            ));
        }
    }
    Ok(())
}
