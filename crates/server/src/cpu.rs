//! CPU accounting of an in-process server's threads, apart from the rest of the process: each
//! thread's CPU clock (nanoseconds) for the total, split into user and system time as
//! `/proc/self/task/<tid>/stat` splits it (clock ticks, usually 10 ms: alone, a short run's
//! server would show no CPU at all), and faults and context switches from `stat` and `status`.

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

fn thread_cpu(t: &Registered) -> Option<CpuTimes> {
    task_cpu(t.tid, clock_seconds(t.clock))
}

/// Thread `tid` of this process: its CPU times as `stat` splits them, rescaled to `total`
/// seconds when its precise total is known (its CPU clock, or its `schedstat`), with its
/// faults and context switches. `None` once the thread is gone.
pub fn task_cpu(tid: i32, total: Option<f64>) -> Option<CpuTimes> {
    let task = format!("/proc/self/task/{tid}");
    let stat = std::fs::read_to_string(format!("{task}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("{task}/status")).ok();
    let ticked = parse_thread(&stat, status.as_deref(), ticks_per_second())?;
    Some(match total {
        Some(total) => split_like(ticked, total),
        None => ticked,
    })
}

/// `t` with its user and system times rescaled to add up to `total` seconds in the same
/// proportion (all user time when no tick was counted yet).
fn split_like(t: CpuTimes, total: f64) -> CpuTimes {
    let ticked = t.user_s + t.sys_s;
    let user_share = if ticked > 0.0 { t.user_s / ticked } else { 1.0 };
    CpuTimes {
        user_s: total * user_share,
        sys_s: total * (1.0 - user_share),
        ..t
    }
}

/// The calling thread's CPU clock, readable from any thread of the process while it lives.
fn current_clock() -> Option<libc::clockid_t> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: pthread_self is always valid for the calling thread; the call only writes
    // `clock`.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
    (rc == 0).then_some(clock)
}

fn clock_seconds(clock: Option<libc::clockid_t>) -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into `ts`; a clock of a thread that has exited
    // fails with EINVAL, which is handled.
    let rc = unsafe { libc::clock_gettime(clock?, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
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

#[derive(Debug, Clone, Copy)]
struct Registered {
    tid: i32,
    clock: Option<libc::clockid_t>,
}

/// The OS thread ids and CPU clocks of a set of threads, e.g. one tokio runtime's workers.
#[derive(Debug, Clone, Default)]
pub struct ThreadGroup {
    threads: Arc<Mutex<Vec<Registered>>>,
}

impl ThreadGroup {
    /// Call on the thread to account (e.g. from `on_thread_start`).
    pub fn register_current(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let clock = current_clock();
        self.threads
            .lock()
            .expect("thread list lock")
            .push(Registered { tid, clock });
    }

    /// CPU used so far by the group's live threads.
    pub fn cpu(&self) -> CpuTimes {
        let threads = self.threads.lock().expect("thread list lock").clone();
        threads
            .iter()
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
    fn less_than_a_clock_tick_of_cpu_is_counted() {
        let g = ThreadGroup::default();
        let own = std::thread::spawn(move || {
            g.register_current();
            // About a millisecond of CPU, a tenth of a tick: bounded by its own clock, and by
            // a count in case that clock does not move.
            let start = clock_seconds(current_clock()).unwrap();
            let mut x = 0u64;
            for i in 0..100_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
                if i % 10_000 == 0 && clock_seconds(current_clock()).unwrap() - start > 1e-3 {
                    break;
                }
            }
            std::hint::black_box(x);
            g.cpu()
        });
        let t = own.join().unwrap();
        assert!(t.total_s() >= 1e-3, "{t:?}");
    }

    #[test]
    fn the_split_follows_the_ticks_and_the_total_the_clock() {
        let t = CpuTimes::new(0.03, 0.01);
        let s = split_like(t, 0.05);
        assert!((s.user_s - 0.0375).abs() < 1e-12 && (s.sys_s - 0.0125).abs() < 1e-12);
        let none = split_like(CpuTimes::new(0.0, 0.0), 0.004);
        assert_eq!((none.user_s, none.sys_s), (0.004, 0.0));
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
