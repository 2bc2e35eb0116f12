//! A CPU-limited client (IMC'17 Figures 12-13, phones): how much of a core the client may use,
//! on which CPUs, and what a run records of the quota it ran under.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The CFS period a quota is a share of: short, so that a throttled client stalls for a few
/// milliseconds at a time, as a slow CPU would, rather than for most of the kernel's default
/// 100 ms.
pub const PERIOD_US: u64 = 10_000;

/// The kernel's smallest quota (1 ms): a smaller share gets a longer period.
pub const MIN_QUOTA_US: u64 = 1_000;

/// The smallest share accepted: the kernel refuses quotas under 1 ms per period.
pub const MIN_FRACTION: f64 = 0.01;

/// The highest CPU number a cpuset may name.
pub const MAX_CPU: u16 = 4095;

/// `--client-cpu`: a share of one core, at least [`MIN_FRACTION`] and at most `cores`.
pub fn parse_fraction(s: &str, cores: usize) -> Result<f64, String> {
    let bad = || {
        format!(
            "`{s}`: a share of one core from {MIN_FRACTION} to {cores} (the cores here), e.g. 0.25"
        )
    };
    let v: f64 = s.trim().parse().map_err(|_| bad())?;
    if v.is_finite() && v >= MIN_FRACTION && v <= cores as f64 {
        Ok(v)
    } else {
        Err(bad())
    }
}

/// The period for a share of a core: [`PERIOD_US`], or longer where the quota would fall
/// under [`MIN_QUOTA_US`] (at most 100 ms, for the smallest share).
pub fn period_us(fraction: f64) -> u64 {
    let needed = (MIN_QUOTA_US as f64 / fraction).ceil() as u64;
    needed.clamp(PERIOD_US, 100_000)
}

/// The quota, in microseconds per [`period_us`], of a share of a core.
pub fn quota_us(fraction: f64) -> u64 {
    (fraction * period_us(fraction) as f64).round() as u64
}

/// One side's `--a.client-cpu`: a share of a core, or `none` (no quota) where the common flag
/// sets one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CpuQuota {
    None,
    Cores(f64),
}

/// The values are validated finite, so equality is total.
impl Eq for CpuQuota {}

impl CpuQuota {
    pub fn parse(s: &str, cores: usize) -> Result<Self, String> {
        match s.trim() {
            "none" => Ok(Self::None),
            v => parse_fraction(v, cores).map(Self::Cores),
        }
    }

    pub fn fraction(self) -> Option<f64> {
        match self {
            Self::None => None,
            Self::Cores(f) => Some(f),
        }
    }
}

impl fmt::Display for CpuQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Cores(v) => write!(f, "{v}"),
        }
    }
}

impl FromStr for CpuQuota {
    type Err = String;
    /// Bounded by [`MAX_CPU`] cores: the machine's own count is checked where it is known.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s, usize::from(MAX_CPU) + 1)
    }
}

impl Serialize for CpuQuota {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// From a string (`"none"`, `"0.25"`) or, as a scenario file may write it, a number.
impl<'de> Deserialize<'de> for CpuQuota {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Number(f64),
            Text(String),
        }
        match Either::deserialize(d)? {
            Either::Number(v) => v.to_string().parse(),
            Either::Text(t) => t.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for CpuQuota {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CpuQuota".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["string", "number"],
            "description": "A share of one core (0.25), or \"none\" for no quota."
        })
    }
}

/// `--client-cpuset 0-1,3`: the CPUs the client's threads may run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<u16>);

impl CpuSet {
    /// The set of `cpus`; `None` when there are none.
    pub fn of(cpus: impl IntoIterator<Item = u16>) -> Option<Self> {
        let set: BTreeSet<u16> = cpus.into_iter().collect();
        (!set.is_empty()).then_some(Self(set))
    }

    pub fn cpus(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.iter().copied()
    }

    pub fn contains(&self, cpu: u16) -> bool {
        self.0.contains(&cpu)
    }
}

impl FromStr for CpuSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let cpu = |v: &str| -> Result<u16, String> {
            match v.trim().parse::<u16>() {
                Ok(n) if n <= MAX_CPU => Ok(n),
                _ => Err(format!("`{v}` is not a CPU number (0 to {MAX_CPU})")),
            }
        };
        let mut set = BTreeSet::new();
        for item in s.split(',') {
            match item.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (cpu(lo)?, cpu(hi)?);
                    if lo > hi {
                        return Err(format!("`{item}`: a range runs from low to high"));
                    }
                    set.extend(lo..=hi);
                }
                None => {
                    set.insert(cpu(item)?);
                }
            }
        }
        Ok(Self(set))
    }
}

/// The canonical form: sorted, ranges collapsed (`0-2,5`).
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut cpus = self.0.iter().copied().peekable();
        while let Some(lo) = cpus.next() {
            let mut hi = lo;
            while cpus.peek() == Some(&(hi + 1)) {
                hi += 1;
                cpus.next();
            }
            parts.push(if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            });
        }
        f.write_str(&parts.join(","))
    }
}

crate::serde_str::string_serde!(CpuSet, {
    "type": "string",
    "pattern": "^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$",
    "description": "CPU numbers and ranges, as the kernel's cpuset lists (\"0-1,3\")."
});

/// Which kernel interface enforced the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CgroupBackend {
    /// cgroup v2 `cpu.max`, on a threaded child of the process's cgroup.
    CgroupV2,
    /// cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    CgroupV1,
}

/// Throttling counters of the client's cgroup over one run (deltas of `cpu.stat`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Throttling {
    /// Enforcement periods in which the client's threads ran.
    pub periods: u64,
    /// Periods in which they used up the quota and were stopped.
    pub throttled_periods: u64,
    /// Time they spent stopped, in microseconds.
    pub throttled_us: u64,
}

impl Throttling {
    /// `cpu.stat` of either version: v1 says `throttled_time` (ns), v2 `throttled_usec`.
    pub fn parse_cpu_stat(text: &str) -> Self {
        let mut t = Self::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(k), Some(v)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(v) = v.parse::<u64>() else { continue };
            match k {
                "nr_periods" => t.periods = v,
                "nr_throttled" => t.throttled_periods = v,
                "throttled_time" => t.throttled_us = v / 1000,
                "throttled_usec" => t.throttled_us = v,
                _ => {}
            }
        }
        t
    }

    /// What happened between two readings (counters never go back; a reset reads as zero).
    pub fn since(&self, before: &Self) -> Self {
        Self {
            periods: self.periods.saturating_sub(before.periods),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(before.throttled_periods),
            throttled_us: self.throttled_us.saturating_sub(before.throttled_us),
        }
    }
}

/// What one run's client ran under, as read back from the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientCpuRecord {
    /// `None`: the run had no quota (the other side of a comparison had one, or only a cpuset
    /// was asked for).
    pub fraction: Option<f64>,
    pub backend: Option<CgroupBackend>,
    /// The cgroup directory the client's threads were in.
    pub cgroup: Option<String>,
    /// As read back: `cpu.max` or `cpu.cfs_quota_us` (`None` = no limit).
    pub quota_us: Option<u64>,
    pub period_us: Option<u64>,
    /// The CPUs the client's threads were pinned to.
    pub cpuset: Option<CpuSet>,
    /// How many of the client's threads were in the cgroup at the run's end.
    pub threads: usize,
    pub throttling: Option<Throttling>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_bounded_by_the_cores_and_the_kernel_minimum() {
        assert_eq!(parse_fraction("0.25", 2), Ok(0.25));
        assert_eq!(parse_fraction(" 2 ", 2), Ok(2.0));
        for bad in ["0", "-1", "0.001", "2.5", "nan", "inf", "quarter", ""] {
            let e = parse_fraction(bad, 2).unwrap_err();
            assert!(e.contains("share of one core"), "{bad}: {e}");
        }
        assert_eq!((quota_us(0.25), period_us(0.25)), (2_500, 10_000));
        assert_eq!((quota_us(0.1), period_us(0.1)), (1_000, 10_000));
        assert_eq!((quota_us(0.05), period_us(0.05)), (1_000, 20_000));
        assert_eq!((quota_us(0.01), period_us(0.01)), (1_000, 100_000));
        assert_eq!((quota_us(2.0), period_us(2.0)), (20_000, 10_000));
    }

    #[test]
    fn side_quotas_say_none_or_a_share() {
        assert_eq!("none".parse(), Ok(CpuQuota::None));
        assert_eq!("0.1".parse(), Ok(CpuQuota::Cores(0.1)));
        assert_eq!(CpuQuota::Cores(0.1).to_string(), "0.1");
        let json = serde_json::to_string(&CpuQuota::Cores(0.25)).unwrap();
        assert_eq!(json, "\"0.25\"");
        assert_eq!(
            serde_json::from_str::<CpuQuota>(&json).unwrap(),
            CpuQuota::Cores(0.25)
        );
        assert!(serde_json::from_str::<CpuQuota>("\"0\"").is_err());
        assert_eq!(
            serde_json::from_str::<CpuQuota>("0.5").unwrap(),
            CpuQuota::Cores(0.5)
        );
        assert!(serde_json::from_str::<CpuQuota>("true").is_err());
    }

    #[test]
    fn cpusets_parse_to_a_canonical_list() {
        let s: CpuSet = "3,0-1,1".parse().unwrap();
        assert_eq!(s.to_string(), "0-1,3");
        assert_eq!(s.cpus().collect::<Vec<_>>(), vec![0, 1, 3]);
        assert_eq!("5".parse::<CpuSet>().unwrap().to_string(), "5");
        for bad in ["", "a", "1-", "3-1", "0,,1", "4096", "-1"] {
            assert!(bad.parse::<CpuSet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_stat_of_both_versions() {
        let v1 = "nr_periods 40\nnr_throttled 30\nthrottled_time 2500000000\nnr_bursts 0\n";
        let t = Throttling::parse_cpu_stat(v1);
        assert_eq!(
            (t.periods, t.throttled_periods, t.throttled_us),
            (40, 30, 2_500_000)
        );
        let v2 = "usage_usec 10\nnr_periods 4\nnr_throttled 3\nthrottled_usec 700\n";
        let later = Throttling::parse_cpu_stat(v2);
        assert_eq!(later.throttled_us, 700);
        assert_eq!(later.since(&t), Throttling::default());
        assert_eq!(t.since(&later).throttled_periods, 27);
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,24}", n in 0usize..64) {
            let _ = parse_fraction(&s, n);
            let _ = s.parse::<CpuQuota>();
            let _ = Throttling::parse_cpu_stat(&s);
            if let Ok(set) = s.parse::<CpuSet>() {
                proptest::prop_assert_eq!(set.to_string().parse::<CpuSet>(), Ok(set));
            }
        }

        #[test]
        fn quotas_are_the_share_asked_and_never_under_the_kernel_minimum(f in MIN_FRACTION..64.0) {
            let (q, p) = (quota_us(f), period_us(f));
            proptest::prop_assert!(q >= MIN_QUOTA_US && (PERIOD_US..=100_000).contains(&p));
            proptest::prop_assert!((q as f64 / p as f64 - f).abs() <= 0.5 / p as f64 + 1e-9);
        }

        #[test]
        fn cpusets_round_trip(cpus in proptest::collection::btree_set(0u16..=MAX_CPU, 1..20)) {
            let text = cpus.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
            let set: CpuSet = text.parse().unwrap();
            proptest::prop_assert_eq!(set.cpus().collect::<BTreeSet<_>>(), cpus);
            proptest::prop_assert_eq!(set.to_string().parse::<CpuSet>(), Ok(set));
        }
    }
}
