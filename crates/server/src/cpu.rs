//! CPU accounting of an in-process server's threads, apart from the rest of the process:
//! from `/proc/self/task/<tid>/stat` (clock-tick resolution, usually 10 ms).

use std::sync::{Arc, Mutex};

use qbench_core::CpuTimes;

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn thread_cpu(tid: i32) -> Option<CpuTimes> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name may contain spaces; fields resume after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let hz = ticks_per_second();
    Some(CpuTimes {
        user_s: fields.get(11)?.parse::<f64>().ok()? / hz,
        sys_s: fields.get(12)?.parse::<f64>().ok()? / hz,
    })
}

/// The OS thread ids of a set of threads, e.g. one tokio runtime's workers.
#[derive(Debug, Clone, Default)]
pub struct ThreadGroup {
    tids: Arc<Mutex<Vec<i32>>>,
}

impl ThreadGroup {
    /// Call on the thread to account (e.g. from `on_thread_start`).
    pub fn register_current(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        self.tids.lock().expect("thread list lock").push(tid);
    }

    /// CPU used so far by the group's live threads.
    pub fn cpu(&self) -> CpuTimes {
        let tids = self.tids.lock().expect("thread list lock").clone();
        tids.into_iter()
            .filter_map(thread_cpu)
            .fold(CpuTimes::default(), |a, t| CpuTimes {
                user_s: a.user_s + t.user_s,
                sys_s: a.sys_s + t.sys_s,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_thread_is_readable() {
        let started = std::time::Instant::now();
        let g = ThreadGroup::default();
        g.register_current();
        // Burn a little CPU so the counters are not all zero on coarse clocks.
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let t = g.cpu();
        // One thread cannot use more CPU than the time it existed (plus a clock tick).
        let lived = started.elapsed().as_secs_f64();
        assert!(t.total_s() > 0.0, "{t:?}");
        assert!(t.total_s() <= lived + 0.02, "{t:?} in {lived} s");
    }
}
