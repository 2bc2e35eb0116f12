//! `--fail-if`: conditions on the finished report that fail the command with its own exit
//! status, for CI.

use clap::Args;
use qbench_core::spec::threshold::Threshold;

/// The exit status of a command whose report met a `--fail-if` condition (1 is an error, 2 bad
/// input).
pub const THRESHOLD_EXIT: u8 = 3;

#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Fail (exit status 3) when this holds on the final report: METRIC OP VALUE, OP one of
    /// `>`, `>=`, `<`, `<=`. Metrics: p50, p90, p99, p999, max, mean (object latency),
    /// ttfb.p99 and the like, errors (a count, or a percentage of objects), rate (objects/s),
    /// goodput (bit/s), plt, handshake (medians over runs); e.g. p99>50ms, errors>0.1%,
    /// rate<19000. For compare: b-worse>P% (or a-worse), B significantly worse than A (the
    /// verdict) by more than P% of A by --metric. Repeatable; the report records each with
    /// what it saw
    #[arg(long = "fail-if", value_name = "EXPR", value_parser = parse_threshold)]
    pub fail_if: Vec<Threshold>,
    /// Judge the --fail-if conditions on errors, latency and TTFB at every interval (1s unless
    /// --interval), on all measured requests so far, and stop as soon as one holds: a held
    /// load stops starting requests and ends with those in flight, no further run starts,
    /// and the report says why in `aborted` (exit status 3). Percentiles, means and error
    /// shares are judged once 100 requests have ended; error counts and maxima at once.
    /// Rates, goodput, PLT and handshake are judged on the final report only
    #[arg(long, requires = "fail_if")]
    pub fail_early: bool,
}

fn parse_threshold(s: &str) -> Result<Threshold, String> {
    s.parse()
        .map_err(|e: qbench_core::spec::threshold::ThresholdError| e.to_string())
}

/// A report met a `--fail-if` condition: the command ends with [`THRESHOLD_EXIT`].
#[derive(Debug, thiserror::Error)]
#[error("--fail-if: {0}")]
pub struct ThresholdsFailed(pub String);

#[derive(Debug, Clone, Args)]
pub struct LiveArgs {
    /// Serve the current run's counts as OpenMetrics on http://ADDR/metrics while qbench runs
    /// (requests by outcome, bytes, errors by kind, in flight, a latency histogram; labelled
    /// with proto, run, shard and run_id), for Prometheus to scrape. Counts are added up each
    /// --interval (1s unless given; the lines are printed only when --interval is). After the
    /// last run, qbench waits up to 30s for a scrape of the final counts if anything scraped
    /// before
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Show the live view (rate, latency percentiles over time, a latency histogram, errors,
    /// in flight, start lag, the busiest client thread) in the terminal while the runs last,
    /// redrawn four times a second from 1s intervals; q or Ctrl-C stops the load as SIGINT
    /// does. Without this flag a held load (--duration) shows it when stdout and stderr are
    /// terminals and neither --interval nor output to stdout is asked for. When stdout is
    /// not a terminal, --tui prints a plain line per interval instead
    #[arg(long, conflicts_with = "no_tui")]
    pub tui: bool,
    /// Never show the live view: a held load shows a progress bar on a terminal, as a run of
    /// objects does
    #[arg(long)]
    pub no_tui: bool,
}

/// How a single benchmark shows its intervals while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// A progress bar, or nothing off a terminal.
    Bar,
    /// A line per interval on stderr.
    Lines,
    /// The live view.
    View,
}

impl LiveArgs {
    /// `held`: a held load; `interval`: `--interval` given; `stdout_data`: a report or stream
    /// goes to stdout; `terminals`: whether stdout and stderr are terminals.
    pub fn shown(
        &self,
        held: bool,
        interval: bool,
        stdout_data: bool,
        terminals: (bool, bool),
    ) -> Shown {
        let can_view = terminals.0 && !stdout_data;
        let auto = held && !interval && terminals.0 && terminals.1;
        match (self.tui, self.no_tui) {
            (true, _) if can_view => Shown::View,
            (true, _) => Shown::Lines,
            (false, false) if auto && can_view => Shown::View,
            _ if interval => Shown::Lines,
            _ => Shown::Bar,
        }
    }
}
