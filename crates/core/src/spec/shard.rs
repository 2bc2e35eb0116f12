//! `--shard I/N`: one of N copies of a command, started by a launcher, each doing its share
//! of one workload so that the N together do exactly the unsharded workload.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// More shards than this is surely a mistake (and keeps every product below in range).
pub const MAX_SHARDS: u32 = 1_000_000;

/// Where launchers put a copy's index, in the order they are read: Slurm job arrays,
/// Kubernetes Indexed Jobs, then PMIx and Open MPI ranks.
pub const INDEX_VARS: [&str; 4] = [
    "SLURM_ARRAY_TASK_ID",
    "JOB_COMPLETION_INDEX",
    "PMIX_RANK",
    "OMPI_COMM_WORLD_RANK",
];

/// Shard `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// `--shard` as given: an index, or `auto` to read it from a launcher's variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardArg {
    Fixed(Shard),
    Auto { count: u32 },
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `I/N` or `auto/N`.
pub fn parse_shard(s: &str) -> Result<ShardArg, String> {
    let (i, n) = s
        .trim()
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not I/N (e.g. 0/4) or auto/N"))?;
    let count: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("`{n}` is not a number of shards"))?;
    if count == 0 || count > MAX_SHARDS {
        return Err(format!("{count} shards: 1 to {MAX_SHARDS}"));
    }
    if i.trim() == "auto" {
        return Ok(ShardArg::Auto { count });
    }
    let index: u32 = i
        .trim()
        .parse()
        .map_err(|_| format!("`{i}` is not a shard index (a number, or auto)"))?;
    Shard::new(index, count).map(ShardArg::Fixed)
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!("{count} shards: 1 to {MAX_SHARDS}"));
        }
        if index >= count {
            return Err(format!(
                "index {index} of {count} shards: indices run from 0 to {}",
                count - 1
            ));
        }
        Ok(Self { index, count })
    }

    /// How many of `total` items (numbered from 0) are this shard's: those whose number is
    /// `index` modulo `count`, so that a mix keeps its proportions in every shard.
    pub fn share(self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        total / n + u64::from(i < total % n)
    }

    /// The number, in the whole, of this shard's `k`-th item.
    pub fn item(self, k: u64) -> u64 {
        k * u64::from(self.count) + u64::from(self.index)
    }

    /// This shard's part of a request rate.
    pub fn rate(self, rate: f64) -> f64 {
        rate / f64::from(self.count)
    }

    /// Where a constant schedule of this shard starts within the whole one: the shards'
    /// requests interleave into exactly the unsharded spacing of 1/`rate`, not N at once.
    pub fn phase(self, rate: f64) -> Duration {
        Duration::from_secs_f64(f64::from(self.index) / rate)
    }

    /// A Poisson schedule's seed per run and shard: no two shards draw the same gaps.
    pub fn seed(self, run: u32) -> u64 {
        u64::from(run) * u64::from(self.count) + u64::from(self.index)
    }
}

impl ShardArg {
    /// The shard, reading `auto`'s index from the first launcher variable that is set (`var`
    /// looks one up); returns which variable it was.
    pub fn resolve(
        self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<(Shard, Option<&'static str>), String> {
        let count = match self {
            Self::Fixed(s) => return Ok((s, None)),
            Self::Auto { count } => count,
        };
        let Some((name, value)) = INDEX_VARS
            .iter()
            .find_map(|&name| var(name).map(|v| (name, v)))
        else {
            return Err(format!(
                "auto/{count}: none of {} is set; give the index as I/{count}",
                INDEX_VARS.join(", ")
            ));
        };
        let parse = |v: &str, what: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("auto/{count}: {what}=`{v}` is not an index"))
        };
        let mut index = parse(&value, name)?;
        // A job array may be numbered from 1 (`--array=1-4`): its first task is shard 0.
        if name == "SLURM_ARRAY_TASK_ID" {
            if let Some(min) = var("SLURM_ARRAY_TASK_MIN") {
                let min = parse(&min, "SLURM_ARRAY_TASK_MIN")?;
                index = index.checked_sub(min).ok_or_else(|| {
                    format!("auto/{count}: {name}={value} is below SLURM_ARRAY_TASK_MIN={min}")
                })?;
            }
        }
        let shard =
            Shard::new(index, count).map_err(|e| format!("auto/{count}: {name}={value}: {e}"))?;
        Ok((shard, Some(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            parse_shard("2/4"),
            Ok(ShardArg::Fixed(Shard { index: 2, count: 4 }))
        );
        assert_eq!(parse_shard("auto/8"), Ok(ShardArg::Auto { count: 8 }));
        for (bad, want) in [
            ("3/2", "index 3 of 2 shards"),
            ("0/0", "0 shards"),
            ("2", "not I/N"),
            ("a/4", "`a` is not a shard index"),
            ("1/x", "`x` is not a number"),
            ("-1/4", "`-1`"),
        ] {
            let e = parse_shard(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn auto_reads_the_launchers_variable_and_names_it() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let auto = ShardArg::Auto { count: 4 };
        assert_eq!(
            auto.resolve(env(&[("JOB_COMPLETION_INDEX", "3")])),
            Ok((Shard { index: 3, count: 4 }, Some("JOB_COMPLETION_INDEX")))
        );
        // Slurm comes first, and an array numbered from 1 starts at shard 0.
        assert_eq!(
            auto.resolve(env(&[
                ("JOB_COMPLETION_INDEX", "0"),
                ("SLURM_ARRAY_TASK_ID", "4"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
            ])),
            Ok((Shard { index: 3, count: 4 }, Some("SLURM_ARRAY_TASK_ID")))
        );
        let none = auto.resolve(env(&[])).unwrap_err();
        assert!(none.contains("none of SLURM_ARRAY_TASK_ID"), "{none}");
        let big = auto.resolve(env(&[("PMIX_RANK", "4")])).unwrap_err();
        assert!(big.contains("PMIX_RANK=4"), "{big}");
        let junk = auto
            .resolve(env(&[("OMPI_COMM_WORLD_RANK", "x")]))
            .unwrap_err();
        assert!(junk.contains("OMPI_COMM_WORLD_RANK=`x`"), "{junk}");
    }

    #[test]
    fn constant_schedules_interleave_into_the_whole() {
        let rate = 1000.0;
        let n = 3;
        let mut all: Vec<Duration> = (0..n)
            .flat_map(|i| {
                let s = Shard::new(i, n).unwrap();
                let sched = crate::spec::load::Schedule::new(s.rate(rate), Default::default(), 0);
                sched.take(100).map(move |t| t + s.phase(rate))
            })
            .collect();
        all.sort();
        let whole: Vec<Duration> = crate::spec::load::Schedule::new(rate, Default::default(), 0)
            .take(300)
            .collect();
        for (a, b) in all.iter().zip(&whole) {
            assert!(a.abs_diff(*b) <= Duration::from_nanos(1), "{a:?} vs {b:?}");
        }
    }

    proptest! {
        /// Every item of the whole is exactly one shard's, for awkward counts too.
        #[test]
        fn every_item_is_one_shards(total in 0u64..2000, count in 1u32..40) {
            let mut seen = vec![0u8; total as usize];
            let mut sum = 0;
            for i in 0..count {
                let s = Shard::new(i, count).unwrap();
                sum += s.share(total);
                for k in 0..s.share(total) {
                    seen[s.item(k) as usize] += 1;
                }
            }
            prop_assert_eq!(sum, total);
            prop_assert!(seen.iter().all(|&c| c == 1));
        }

        #[test]
        fn shard_parser_never_panics(s in "\\PC{0,24}") {
            let _ = parse_shard(&s);
        }
    }
}
