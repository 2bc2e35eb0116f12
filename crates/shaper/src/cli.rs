//! The `qbench-shaper` command line, here so that `qbench man` and `qbench completions`
//! describe it from the same definition.

use clap::{Parser, Subcommand};
use qbench_core::spec::link::LinkSpec;

use crate::{BackendChoice, Offloads};

/// Emulated links between network namespaces: client <-> router <-> server, with the
/// impairments on the router. Every object it creates is named `qb-...`.
#[derive(Debug, Parser)]
#[command(name = "qbench-shaper", version = env!("QBENCH_VERSION"))]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

// Parsed once per process; boxing the spec would only complicate clap's parser.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Build the link and hold it until SIGINT/SIGTERM/SIGHUP (or `down`), then tear it down
    Up {
        /// e.g. rate=100mbit,rtt=36ms,loss=1% (see `qbench --help`, --link)
        spec: LinkSpec,
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        #[arg(long, value_enum, default_value = "default")]
        offloads: Offloads,
        /// Namespace id (hex): namespaces are qb-ID-c, qb-ID-r, qb-ID-s
        #[arg(long, value_parser = parse_new_id)]
        id: Option<String>,
        /// TCP congestion-window cap in packets on the server's route toward the client
        #[arg(long)]
        tcp_cwnd_cap: Option<u32>,
        /// Do not measure the link once it is up (see `check`)
        #[arg(long)]
        no_calibrate: bool,
        /// Refuse (and take down) a link that misses a field of its spec beyond the tolerances
        #[arg(long, conflicts_with = "no_calibrate")]
        strict_link: bool,
        /// Print the commands as a shell script instead of running them
        #[arg(long)]
        dry_run: bool,
    },
    /// Build the link, measure it (round trips, loss and reordering each way with an echo
    /// probe; each fixed rate with a saturating UDP flow), print asked against measured, and
    /// tear it down. Exit status 3 when a field misses its tolerance
    Check {
        /// e.g. rate=100mbit,rtt=36ms,loss=1%
        spec: LinkSpec,
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        #[arg(long, value_enum, default_value = "default")]
        offloads: Offloads,
        /// Print the measurement as JSON (the run report's `link.calibration`) instead of a table
        #[arg(long)]
        json: bool,
        /// Namespace id (hex), as for `up`
        #[arg(long, value_parser = parse_new_id)]
        id: Option<String>,
    },
    /// Tear down the link with this id
    Down {
        #[arg(long, value_parser = parse_id)]
        id: String,
    },
    /// List the links that exist
    Status,
    /// Remove every `qb-` namespace, empty `qb-<hex>-cpu` cgroup, `qb-<hex>-client` cgroup (its
    /// processes killed first) and `qb-<hex>-scratch` directory (a third-party client's files,
    /// in the temporary directory) left behind (e.g. after a killed run); touches nothing else.
    /// Those a live process owns (a run still going) are left alone
    Cleanup {
        /// Remove those a live process owns too
        #[arg(long)]
        force: bool,
        /// Only this id's objects (`qb-ID-c|r|s`, `qb-ID-cpu`, `qb-ID-client`, `qb-ID-scratch`);
        /// may be repeated
        #[arg(long = "id", value_parser = parse_id)]
        ids: Vec<String>,
    },
}

pub fn parse_id(s: &str) -> Result<String, String> {
    if !s.is_empty() && s.len() <= 8 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err("1 to 8 hex digits".into())
    }
}

/// The id of a link to build: eight digits from f0000000 up name the kernel probe's own
/// namespaces (`probe::probe_id`), which a probe deletes when it ends.
pub fn parse_new_id(s: &str) -> Result<String, String> {
    let id = parse_id(s)?;
    if id.len() == 8 && id.starts_with('f') {
        return Err("1 to 8 hex digits, below f0000000 (those name qbench's probes)".into());
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::{parse_id, parse_new_id};

    #[test]
    fn ids_are_hex_and_new_links_keep_clear_of_the_probes() {
        assert_eq!(parse_id("A1b2").as_deref(), Ok("a1b2"));
        assert_eq!(parse_id("fffffff0").as_deref(), Ok("fffffff0"));
        assert!(parse_id("").is_err() && parse_id("123456789").is_err() && parse_id("x1").is_err());
        assert_eq!(parse_new_id("efffffff").as_deref(), Ok("efffffff"));
        assert_eq!(parse_new_id("fff").as_deref(), Ok("fff"));
        assert!(parse_new_id("F0000000").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_an_id_or_an_error(s in "\\PC{0,12}") {
            let _ = parse_id(&s);
            if let Ok(id) = parse_new_id(&s) {
                proptest::prop_assert!(!(id.len() == 8 && id.starts_with('f')));
            }
        }
    }
}
