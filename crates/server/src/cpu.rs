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
    let task = format!("/proc/self/task/{tid}");
    let stat = std::fs::read_to_string(format!("{task}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("{task}/status")).ok();
    parse_thread(&stat, status.as_deref(), ticks_per_second())
}

/// A thread's CPU times and minor faults from its `stat`, and its context switches from its
/// `status` (without which they are absent).
fn parse_thread(stat: &str, status: Option<&str>, hz: f64) -> Option<CpuTimes> {
    // The command name may contain spaces; fields resume after its closing parenthesis
    // (field 3, `state`, is index 0).
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let switches = |key: &str| {
        status?
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
    };
    Some(CpuTimes {
        user_s: field(11)? as f64 / hz,
        sys_s: field(12)? as f64 / hz,
        minor_faults: field(7),
        voluntary_switches: switches("voluntary_ctxt_switches:"),
        involuntary_switches: switches("nonvoluntary_ctxt_switches:"),
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
            .fold(CpuTimes::zero_counted(), |a, t| a.plus(&t))
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
        assert!(
            t.voluntary_switches.is_some() && t.minor_faults.is_some(),
            "{t:?}"
        );
    }

    #[test]
    fn stat_and_status_fields_are_read_by_position_and_name() {
        // A command name with spaces and a parenthesis, as /proc prints it.
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 123 0 0 0 250 50 0 0 20 0 1 0 9 0 0";
        let status = "Name:\ta) b\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n";
        let t = parse_thread(stat, Some(status), 100.0).unwrap();
        assert_eq!((t.user_s, t.sys_s), (2.5, 0.5));
        assert_eq!(t.minor_faults, Some(123));
        assert_eq!(
            (t.voluntary_switches, t.involuntary_switches),
            (Some(17), Some(3))
        );
        let bare = parse_thread(stat, None, 100.0).unwrap();
        assert_eq!(bare.voluntary_switches, None);
        assert_eq!(parse_thread("42 (x", None, 100.0), None);
        assert_eq!(parse_thread("42 (x) S 1", None, 100.0), None);
    }

    proptest::proptest! {
        #[test]
        fn any_stat_and_status_give_a_value_or_none(
            stat in "[0-9a-zA-Z ()-]{0,80}",
            status in proptest::option::of("[a-z_:\t\n0-9 ]{0,80}"),
        ) {
            let _ = parse_thread(&stat, status.as_deref(), 100.0);
        }
    }
}
