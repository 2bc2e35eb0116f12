//! `--server-cpu`: the in-process server's threads (the sender of a download) get a share of
//! a core handed out in slices, as a VM's vCPU is when its host is busy (2BRobust, 2026:
//! BBR's throughput collapses when the sender's CPU is time-sliced; Cubic's does not). The
//! slicing is a CFS quota of the server's threads together, the kernel's deadline scheduler
//! (`SCHED_DEADLINE`) on each of its worker threads, or their CPU taken away for the rest of
//! each period by a real-time thread.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::cpulimit::{CgroupBackend, Throttling, MIN_FRACTION, MIN_QUOTA_US};

/// The slice period when none is given: the kernel's default CFS period, so that a throttled
/// server stops sending for most of 100 ms at a time, as a descheduled vCPU does.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);
pub const MIN_PERIOD: Duration = Duration::from_millis(1);
pub const MAX_PERIOD: Duration = Duration::from_secs(1);

/// Who hands out the slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Slicer {
    /// A CFS bandwidth quota (cgroup `cpu.max`, or v1 `cpu.cfs_quota_us`) over all the
    /// server's threads: they run until the share of the period is spent, then wait for the
    /// next period.
    Cfs,
    /// `SCHED_DEADLINE` on each worker thread: the share of each period divided among the
    /// workers, as runtime per period, with the period as deadline.
    Deadline,
    /// The server's threads pinned to one CPU, which a real-time thread takes for the rest
    /// of each period: the server waits out those parts whatever it has to do, as a
    /// descheduled vCPU does. CFS and deadline only hold back a thread that spent its share.
    Steal,
}

/// A share of one core in slices of `period_us`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerCpu {
    pub share: f64,
    pub period_us: u64,
    pub sched: Slicer,
}

/// The values are validated finite, so equality is total.
impl Eq for ServerCpu {}

impl ServerCpu {
    /// The CPU time per period, in µs, the server's threads may use together.
    pub fn quota_us(&self) -> u64 {
        (self.share * self.period_us as f64).round() as u64
    }

    /// A deadline worker's runtime per period, in ns: its part of the share.
    pub fn runtime_ns(&self, workers: usize) -> u64 {
        (self.share * self.period_us as f64 * 1000.0 / workers.max(1) as f64).round() as u64
    }

    /// The share within `cores`, and for the deadline scheduler at most one core per worker
    /// (a thread cannot run on two).
    pub fn check(&self, cores: usize, workers: usize) -> Result<(), String> {
        if self.share > cores as f64 {
            // A share of 1e308 is said as such, not in 309 digits.
            return Err(format!(
                "a share of {:e} is more than the {cores} cores here",
                self.share
            ));
        }
        if self.sched == Slicer::Steal && !(0.05..=0.95).contains(&self.share) {
            return Err(format!(
                "steal leaves the server from 0.05 to 0.95 of its CPU (the kernel keeps 5% of each CPU from real-time threads), not {}",
                self.share
            ));
        }
        if self.sched == Slicer::Steal && cores < 2 {
            return Err(
                "steal needs 2 CPUs: one for the server and what takes it, the rest for the client"
                    .into(),
            );
        }
        if self.sched == Slicer::Deadline && self.share > 0.95 * workers.max(1) as f64 {
            return Err(format!(
                "the deadline scheduler gives each of the {} worker threads at most 0.95 of a core (the kernel keeps 5% for others); give a smaller share or more --server-threads",
                workers.max(1)
            ));
        }
        Ok(())
    }
}

fn bad(s: &str, why: &str) -> String {
    format!(
        "`{s}`: {why}; give [cfs:|deadline:|steal:]SHARE[/PERIOD], e.g. 0.2/100ms or steal:0.5/20ms"
    )
}

impl FromStr for ServerCpu {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (sched, rest) = match t.split_once(':') {
            Some(("cfs", r)) => (Slicer::Cfs, r),
            Some(("deadline", r)) => (Slicer::Deadline, r),
            Some(("steal", r)) => (Slicer::Steal, r),
            Some((other, _)) => return Err(bad(s, &format!("no scheduler `{other}`"))),
            None => (Slicer::Cfs, t),
        };
        let (share, period) = match rest.split_once('/') {
            Some((sh, p)) => {
                let d = humantime::parse_duration(p.trim()).map_err(|e| bad(s, &e.to_string()))?;
                (sh, d)
            }
            None => (rest, DEFAULT_PERIOD),
        };
        let share: f64 = share
            .trim()
            .parse()
            .map_err(|_| bad(s, "the share is not a number"))?;
        if !share.is_finite() || share < MIN_FRACTION {
            return Err(bad(s, &format!("the share is at least {MIN_FRACTION}")));
        }
        if !(MIN_PERIOD..=MAX_PERIOD).contains(&period) || period.subsec_nanos() % 1000 != 0 {
            return Err(bad(s, "the period is whole microseconds from 1ms to 1s"));
        }
        let v = Self {
            share,
            period_us: period.as_micros() as u64,
            sched,
        };
        if v.quota_us() < MIN_QUOTA_US {
            return Err(bad(
                s,
                "the share of a period is at least 1ms (the kernel's smallest quota)",
            ));
        }
        Ok(v)
    }
}

impl fmt::Display for ServerCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let period = humantime::format_duration(Duration::from_micros(self.period_us));
        match self.sched {
            Slicer::Cfs => write!(f, "{}/{period}", self.share),
            Slicer::Deadline => write!(f, "deadline:{}/{period}", self.share),
            Slicer::Steal => write!(f, "steal:{}/{period}", self.share),
        }
    }
}

/// `--server-cpu` as a knob takes it: a limit, or `none`.
pub fn parse_choice(s: &str) -> Result<Option<ServerCpu>, String> {
    match s.trim() {
        "none" => Ok(None),
        v => v.parse().map(Some),
    }
}

/// What the server ran under in one run, read back from the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerCpuRecord {
    pub limit: ServerCpu,
    /// The CPU the server's threads were pinned to (steal only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u16>,
    /// The cgroup's kind (CFS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<CgroupBackend>,
    /// The quota and period in force (CFS), each worker's runtime and period (deadline), or
    /// the part of each period left to the server (steal),
    /// in µs, as read back.
    pub quota_us: u64,
    pub period_us: u64,
    /// The server threads the limit held during the run.
    pub threads: usize,
    /// Periods the quota ran out in, during the run (CFS), or the periods the stealing
    /// thread took the server's CPU in and the time it took (steal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<Throttling>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_a_share_its_period_and_its_scheduler() {
        let v: ServerCpu = "0.2/100ms".parse().unwrap();
        assert_eq!((v.share, v.period_us, v.sched), (0.2, 100_000, Slicer::Cfs));
        assert_eq!(v.quota_us(), 20_000);
        let d: ServerCpu = "deadline:0.5/20ms".parse().unwrap();
        assert_eq!((d.period_us, d.sched), (20_000, Slicer::Deadline));
        assert_eq!(d.runtime_ns(2), 5_000_000);
        assert_eq!("0.3".parse::<ServerCpu>().unwrap().period_us, 100_000);
        for v in ["0.2/100ms", "deadline:0.5/20ms", "1.5/1s", "steal:0.3/50ms"] {
            assert_eq!(v.parse::<ServerCpu>().unwrap().to_string(), v);
        }
        assert_eq!(parse_choice("none"), Ok(None));
    }

    #[test]
    fn refuses_what_the_kernel_would() {
        for v in [
            "0",
            "-1",
            "nan",
            "0.2/0s",
            "0.2/2s",
            "0.001/100ms",
            "rt:0.2",
            "0.2/1500ns",
        ] {
            assert!(v.parse::<ServerCpu>().is_err(), "{v}");
        }
        // Under 1 ms a period: the kernel's smallest quota.
        assert!("0.1/5ms".parse::<ServerCpu>().is_err());
        let d: ServerCpu = "deadline:1.5".parse().unwrap();
        assert!(d.check(2, 1).is_err() && d.check(2, 2).is_ok());
        assert!("3".parse::<ServerCpu>().unwrap().check(2, 1).is_err());
        let steal = |v: &str| v.parse::<ServerCpu>().unwrap();
        assert!(steal("steal:0.3").check(2, 1).is_ok());
        assert!(steal("steal:0.3").check(1, 1).is_err());
        assert!(steal("steal:0.99").check(2, 1).is_err());
    }

    proptest! {
        #[test]
        fn any_text_is_a_limit_or_an_error(s in ".{0,40}") {
            let _ = parse_choice(&s);
        }

        #[test]
        fn a_limit_reads_back_as_itself(share in 0.01f64..8.0, ms in 1u64..1000, how in 0..3usize) {
            let text = format!("{}{share}/{ms}ms", ["", "deadline:", "steal:"][how]);
            if let Ok(v) = text.parse::<ServerCpu>() {
                prop_assert_eq!(v.to_string().parse::<ServerCpu>(), Ok(v));
            }
        }
    }
}
