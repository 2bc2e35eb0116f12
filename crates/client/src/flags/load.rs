//! The flags that hold a load (`--duration`, `--rate`...) and turn into a checked `Load`.

use std::time::Duration;

use clap::Args;
use qbench_core::spec::load::{parse_rate, Arrivals, Load, DEFAULT_MAX_INFLIGHT};

use qbench_engine::error::ConfigError;

#[derive(Debug, Clone, Default, Args)]
pub struct LoadArgs {
    /// Hold the load this long instead of fetching --objects once, cycling through them (a
    /// list is a mix): each connection keeps --streams requests in flight (closed loop), or
    /// requests start at --rate (open loop). Includes --warmup. Each of --runs holds it anew
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,

    /// Run the first part of --duration but leave it out of every figure
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub warmup: Option<Duration>,

    /// Open loop: start this many requests per second over all connections, at intended
    /// times that never wait for responses; latency counts from the intended start, so a
    /// stalled server shows (e.g. 20000, 20k). Needs --duration
    #[arg(long, value_name = "PER_SECOND", allow_negative_numbers = true, value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// How --rate's intended start times are spaced [default: constant]
    #[arg(long, value_enum)]
    pub arrivals: Option<Arrivals>,

    /// With --rate: a request due while this many are in flight is counted as dropped,
    /// never delayed [default: 10000]
    #[arg(long, value_name = "N")]
    pub max_inflight: Option<u32>,

    /// Print what completed in each interval of this length on stderr, and write it to
    /// --json-stream (e.g. 1s)
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub interval: Option<Duration>,
}

impl LoadArgs {
    /// Flags that mean nothing without the one they refine, named in one line (clap's
    /// `requires` would print the missing flag on a second line).
    pub fn check(&self, json_stream: bool) -> Result<(), ConfigError> {
        let needs = |given: bool, flag: &'static str, what: &str| {
            if given {
                Err(ConfigError {
                    flag,
                    message: format!("needs {what}"),
                })
            } else {
                Ok(())
            }
        };
        let held = self.duration.is_some();
        needs(!held && self.warmup.is_some(), "--warmup", "--duration")?;
        needs(
            !held && self.rate.is_some(),
            "--rate",
            "--duration (how long to hold the rate)",
        )?;
        let open = self.rate.is_some();
        needs(!open && self.arrivals.is_some(), "--arrivals", "--rate")?;
        needs(
            !open && self.max_inflight.is_some(),
            "--max-inflight",
            "--rate",
        )?;
        needs(
            json_stream && self.interval.is_none(),
            "--json-stream",
            "--interval",
        )
    }

    /// The load these flags ask for, checked with the rest of the spec; `None` without
    /// `--duration`.
    pub fn load(&self) -> Option<Load> {
        Some(Load {
            duration: self.duration?,
            warmup: self.warmup.unwrap_or_default(),
            rate: self.rate,
            arrivals: self.arrivals.unwrap_or_default(),
            max_inflight: self.max_inflight.unwrap_or(DEFAULT_MAX_INFLIGHT),
        })
    }
}
