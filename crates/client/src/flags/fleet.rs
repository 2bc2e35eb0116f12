//! `--shard` and `--start-at`: how a copy of a benchmark is told which part of the workload
//! is its own and when to begin.

use std::time::SystemTime;

use clap::Args;
use qbench_core::spec::shard::{parse_shard, Shard, ShardArg};
use qbench_core::spec::start::{parse_start_at, StartAt, MAX_WAIT};
use qbench_engine::error::{bad, ConfigError};
use qbench_engine::Barrier;

#[derive(Debug, Clone, Default, Args)]
pub struct FleetArgs {
    /// Do shard I of N of the workload (objects, connections, --rate, --max-inflight), so
    /// that N copies together do exactly the whole; auto/N reads I from SLURM_ARRAY_TASK_ID,
    /// JOB_COMPLETION_INDEX, PMIX_RANK or OMPI_COMM_WORLD_RANK. Merge with `qbench merge`
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<ShardArg>,

    /// Wait for this wall-clock time before the first run: RFC 3339
    /// (2026-11-24T10:00:00Z), unix seconds, or +DELAY@FILE (DELAY after FILE's
    /// modification time, for a file every copy sees; +DELAY alone counts from now)
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

impl FleetArgs {
    /// The shard, and which launcher variable named it (`auto`).
    pub fn shard(&self) -> Result<Option<(Shard, Option<&'static str>)>, ConfigError> {
        self.shard
            .map(|s| s.resolve(|k| std::env::var(k).ok()))
            .transpose()
            .map_err(|e| bad("--shard", e))
    }

    /// The barrier, resolved now (a file's modification time is read once).
    pub fn barrier(&self) -> Result<Option<Barrier>, ConfigError> {
        let Some(given) = &self.start_at else {
            return Ok(None);
        };
        let start = parse_start_at(given).map_err(|e| bad("--start-at", e))?;
        let now = SystemTime::now();
        let at = match start {
            StartAt::At(t) => t,
            StartAt::After { delay, file: None } => now + delay,
            StartAt::After {
                delay,
                file: Some(f),
            } => {
                let m = std::fs::metadata(&f)
                    .and_then(|m| m.modified())
                    .map_err(|e| {
                        bad(
                            "--start-at",
                            format!("reading the modification time of {}: {e}", f.display()),
                        )
                    })?;
                m + delay
            }
        };
        if at.duration_since(now).is_ok_and(|ahead| ahead > MAX_WAIT) {
            return Err(bad(
                "--start-at",
                format!(
                    "`{given}` is more than {} away",
                    humantime::format_duration(MAX_WAIT)
                ),
            ));
        }
        Ok(Some(Barrier {
            given: given.clone(),
            at,
        }))
    }

    /// Flags that concern a single benchmark copy, refused elsewhere.
    pub fn refuse(&self, command: &str) -> Result<(), ConfigError> {
        for (flag, given) in [
            ("--shard", self.shard.is_some()),
            ("--start-at", self.start_at.is_some()),
        ] {
            if given {
                return Err(bad(
                    flag,
                    format!(
                        "shards a single benchmark (qbench without a subcommand), not {command}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn barriers_from_files_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("go");
        std::fs::write(&f, "").unwrap();
        let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
        let args = FleetArgs {
            shard: None,
            start_at: Some(format!("+5s@{}", f.display())),
        };
        let b = args.barrier().unwrap().unwrap();
        assert_eq!(b.at, mtime + Duration::from_secs(5));
        let missing = FleetArgs {
            start_at: Some(format!("+5s@{}", dir.path().join("nope").display())),
            ..args.clone()
        };
        let e = missing.barrier().unwrap_err();
        assert!(
            e.flag == "--start-at" && e.message.contains("nope"),
            "{e:?}"
        );
        let far = FleetArgs {
            start_at: Some("2999-01-01T00:00:00Z".into()),
            ..args
        };
        assert!(far.barrier().unwrap_err().message.contains("more than"));
    }
}
