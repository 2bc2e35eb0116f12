//! CPU time of this whole process, with its page faults and context switches, from `getrusage`
//! (microseconds); the in-process server
//! accounts for its own threads, and the client's share is the difference.

use qbench_core::report::spread::{RoleCpu, ThreadRole};
use qbench_core::CpuTimes;

/// The machine's CPU counters, or `None` where `/proc/stat` cannot be read or parsed (the run
/// then records no noise; it is not worth failing a measurement for).
pub(crate) fn machine_cpu() -> Option<qbench_core::stats::noise::CpuStat> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    qbench_core::stats::noise::parse_proc_stat(&text).ok()
}

/// CPU time of the whole process so far.
pub fn process_cpu() -> CpuTimes {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return CpuTimes::default();
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    CpuTimes {
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
        minor_faults: Some(ru.ru_minflt as u64),
        voluntary_switches: Some(ru.ru_nvcsw as u64),
        involuntary_switches: Some(ru.ru_nivcsw as u64),
    }
}

/// One thread's scheduler figures from /proc (nanoseconds).
#[derive(Debug, Clone)]
pub(crate) struct ThreadTime {
    pub tid: u32,
    pub name: String,
    pub on_cpu_ns: u64,
    pub waiting_ns: u64,
}

/// Every thread of this process with its role. Empty where /proc lacks it.
pub(crate) fn all_threads() -> Vec<(ThreadRole, ThreadTime)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let main = std::process::id();
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: u32 = e.file_name().to_str()?.parse().ok()?;
        let t = thread_time(&e.path(), tid)?;
        Some((ThreadRole::of(&t.name, tid == main), t))
    })
    .collect()
}

fn thread_time(dir: &std::path::Path, tid: u32) -> Option<ThreadTime> {
    let name = std::fs::read_to_string(dir.join("comm")).ok()?;
    let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let mut f = stat.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some(ThreadTime {
        tid,
        on_cpu_ns: f.next()??,
        waiting_ns: f.next()??,
        name: name.trim().to_string(),
    })
}

/// The CPU times, faults and switches so far of this process's live threads in `role`, e.g.
/// the link emulator's forwarders, which run in the client's process but are not the client.
pub(crate) fn role_times(role: ThreadRole) -> CpuTimes {
    all_threads()
        .into_iter()
        .filter(|(r, _)| *r == role)
        .filter_map(|(_, t)| {
            let tid = i32::try_from(t.tid).ok()?;
            qbench_server::cpu::task_cpu(tid, Some(t.on_cpu_ns as f64 / 1e9))
        })
        .fold(CpuTimes::zero_counted(), |a, t| a.plus(&t))
}

/// This process's client threads: the main thread and the client runtime's (not the
/// in-process server's, nor the link's forwarders). Empty where /proc lacks it.
pub(crate) fn client_threads() -> Vec<ThreadTime> {
    all_threads()
        .into_iter()
        .filter(|(role, _)| *role == ThreadRole::Client)
        .map(|(_, t)| t)
        .collect()
}

/// Each role's CPU between two snapshots of `all_threads`, in role order; threads that started
/// during it count from zero, threads that ended during it do not count.
pub(crate) fn role_cpu(
    before: &[(ThreadRole, ThreadTime)],
    after: &[(ThreadRole, ThreadTime)],
    wall: std::time::Duration,
) -> Vec<RoleCpu> {
    let wall_ns = wall.as_nanos().max(1) as f64;
    let per_thread = after.iter().map(|(role, a)| {
        let b = before.iter().find(|(_, b)| b.tid == a.tid);
        let on = a.on_cpu_ns - b.map_or(0, |(_, b)| b.on_cpu_ns.min(a.on_cpu_ns));
        RoleCpu {
            role: *role,
            threads: 1,
            cpu_s: on as f64 / 1e9,
            busiest: on as f64 / wall_ns,
        }
    });
    RoleCpu::by_role(per_thread, u32::saturating_add)
}

/// The busiest share on a CPU and the longest share waiting for one of the link's delay-line
/// threads between two snapshots of `all_threads`; `None` without such threads.
pub(crate) fn delay_line_cpu(
    before: &[(ThreadRole, ThreadTime)],
    after: &[(ThreadRole, ThreadTime)],
    wall: std::time::Duration,
) -> Option<qbench_core::report::link_run::DelayLineCpu> {
    let pick = |v: &[(ThreadRole, ThreadTime)]| -> Vec<ThreadTime> {
        v.iter()
            .filter(|(r, _)| *r == ThreadRole::Link)
            .map(|(_, t)| t.clone())
            .collect()
    };
    let loads = thread_loads(&pick(before), &pick(after), wall);
    (!loads.is_empty()).then(|| qbench_core::report::link_run::DelayLineCpu {
        busiest: loads.iter().map(|l| l.busy).fold(0.0, f64::max),
        waiting: loads.iter().map(|l| l.waiting).fold(0.0, f64::max),
    })
}

/// Each thread's share of `wall` on a CPU and waiting for one, between two snapshots;
/// threads that started during it count from zero.
pub(crate) fn thread_loads(
    before: &[ThreadTime],
    after: &[ThreadTime],
    wall: std::time::Duration,
) -> Vec<qbench_core::stats::saturation::ThreadLoad> {
    let wall_ns = wall.as_nanos().max(1) as f64;
    after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.tid == a.tid);
            let on = a.on_cpu_ns - b.map_or(0, |b| b.on_cpu_ns.min(a.on_cpu_ns));
            let wait = a.waiting_ns - b.map_or(0, |b| b.waiting_ns.min(a.waiting_ns));
            qbench_core::stats::saturation::ThreadLoad {
                name: a.name.clone(),
                busy: on as f64 / wall_ns,
                waiting: wait as f64 / wall_ns,
            }
        })
        .collect()
}

/// The busiest client thread between one call of `sample` and the next: a live view's sign
/// that the client, not what it measures, may set the pace.
pub struct BusiestThread {
    last: Vec<ThreadTime>,
    at: std::time::Instant,
}

impl BusiestThread {
    pub fn start() -> Self {
        Self {
            last: client_threads(),
            at: std::time::Instant::now(),
        }
    }

    /// The name and share on a CPU of the client thread busiest since the last sample;
    /// `None` where /proc has no thread figures.
    pub fn sample(&mut self) -> Option<(String, f64)> {
        let now = client_threads();
        let wall = self.at.elapsed();
        let loads = thread_loads(&self.last, &now, wall);
        self.last = now;
        self.at = std::time::Instant::now();
        loads
            .into_iter()
            .max_by(|a, b| a.busy.total_cmp(&b.busy))
            .map(|t| (t.name, t.busy.min(1.0)))
    }
}

/// Clock ticks per second of `/proc/stat` and `/proc/*/stat` (USER_HZ).
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|t| *t > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins for a while on a thread named `name`, then reads `snapshot` from that thread.
    fn spin_as<T: Send + 'static>(name: &str, snapshot: fn() -> T) -> T {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let t = std::time::Instant::now();
                let mut x = 0u64;
                while t.elapsed() < std::time::Duration::from_millis(30) {
                    x = x.wrapping_add(1);
                }
                std::hint::black_box(x);
                snapshot()
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// A client-runtime thread that spins is found and counted busy; other threads are not
    /// the client's.
    #[test]
    fn client_threads_are_found_and_their_cpu_counted() {
        let before = client_threads();
        let started = std::time::Instant::now();
        let after = spin_as("qbench-client", client_threads);
        let loads = thread_loads(&before, &after, started.elapsed());
        let spun = loads
            .iter()
            .find(|t| t.name == "qbench-client")
            .expect("found");
        assert!(spun.busy > 0.0, "{loads:?}");
        let other = spin_as("qbench-server", client_threads);
        assert!(other.iter().all(|t| t.name != "qbench-server"));
    }

    /// A spinning server thread's time lands in the server's role, not the client's.
    #[test]
    fn role_cpu_sorts_threads_by_role() {
        let before = all_threads();
        let started = std::time::Instant::now();
        let after = spin_as("qbench-server", all_threads);
        let roles = role_cpu(&before, &after, started.elapsed());
        let server = roles
            .iter()
            .find(|r| r.role == ThreadRole::Server)
            .expect("server role");
        // The other test may run a server-named thread at the same time.
        assert!(server.threads >= 1, "{roles:?}");
        assert!(server.cpu_s > 0.0 && server.busiest > 0.0, "{roles:?}");
        assert!(
            roles.iter().any(|r| r.role == ThreadRole::Client),
            "{roles:?}"
        );
        assert!(roles.windows(2).all(|w| w[0].role < w[1].role), "{roles:?}");
    }
}
