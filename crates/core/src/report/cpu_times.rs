//! CPU time a side of a run spent, with its page faults and context switches.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuTimes {
    pub user_s: f64,
    pub sys_s: f64,
    /// Minor page faults (served from memory, no I/O); absent where the kernel did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
    /// Times a thread blocked (in epoll, a futex, a read) and was woken again: the
    /// cross-thread wakeups the work took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_switches: Option<u64>,
    /// Times the scheduler took the CPU from a thread that could still run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_switches: Option<u64>,
}

impl CpuTimes {
    pub fn new(user_s: f64, sys_s: f64) -> Self {
        Self {
            user_s,
            sys_s,
            ..Self::default()
        }
    }

    pub fn total_s(&self) -> f64 {
        self.user_s + self.sys_s
    }

    /// `self - earlier`, clamped at zero (tick-based sources can step unevenly); a counter
    /// either side lacks is absent.
    pub fn since(&self, earlier: &Self) -> Self {
        let diff = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        Self {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            minor_faults: diff(self.minor_faults, earlier.minor_faults),
            voluntary_switches: diff(self.voluntary_switches, earlier.voluntary_switches),
            involuntary_switches: diff(self.involuntary_switches, earlier.involuntary_switches),
        }
    }

    /// Both together (threads or runs); a counter either side lacks is absent.
    pub fn plus(&self, other: &Self) -> Self {
        let sum = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        Self {
            user_s: self.user_s + other.user_s,
            sys_s: self.sys_s + other.sys_s,
            minor_faults: sum(self.minor_faults, other.minor_faults),
            voluntary_switches: sum(self.voluntary_switches, other.voluntary_switches),
            involuntary_switches: sum(self.involuntary_switches, other.involuntary_switches),
        }
    }

    /// The counters alone, zero: the start of a sum over threads or runs that have them.
    pub fn zero_counted() -> Self {
        Self {
            minor_faults: Some(0),
            voluntary_switches: Some(0),
            involuntary_switches: Some(0),
            ..Self::default()
        }
    }
}
