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
    /// does. Without this flag a held load (--duration) shows it when stdin, stdout and
    /// stderr are terminals and neither --interval nor output to stdout is asked for. When
    /// stdout is not a terminal, or stdin is not (the view's keys come from it), --tui prints
    /// a plain line per interval instead
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

/// Which of the standard streams are terminals.
#[derive(Debug, Clone, Copy)]
pub struct Terminals {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

impl Terminals {
    pub fn now() -> Self {
        use std::io::IsTerminal;
        Self {
            stdin: std::io::stdin().is_terminal(),
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
        }
    }
}

/// Why `--tui` printed lines although stdout is a terminal: the view reads its keys (q,
/// Ctrl-C, which raw mode turns from a signal into a key) where the terminal's keys come
/// from, and a view whose keys never come can neither be stopped nor closed.
pub const NO_KEYS_NOTE: &str =
    "--tui: stdin is not a terminal, so no key could stop the view: a line per interval instead";

impl LiveArgs {
    /// `held`: a held load; `interval`: `--interval` given; `stdout_data`: a report or stream
    /// goes to stdout. With the note to print when `--tui` was asked for on a terminal but
    /// lines are printed instead.
    pub fn shown(
        &self,
        held: bool,
        interval: bool,
        stdout_data: bool,
        t: Terminals,
    ) -> (Shown, Option<&'static str>) {
        let can_view = t.stdin && t.stdout && !stdout_data;
        let auto = held && !interval && t.stdout && t.stderr;
        let shown = match (self.tui, self.no_tui) {
            (true, _) if can_view => Shown::View,
            (true, _) => Shown::Lines,
            (false, false) if auto && can_view => Shown::View,
            _ if interval => Shown::Lines,
            _ => Shown::Bar,
        };
        let note = (self.tui && t.stdout && !stdout_data && !t.stdin).then_some(NO_KEYS_NOTE);
        (shown, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(tui: bool) -> LiveArgs {
        LiveArgs {
            metrics_listen: None,
            tui,
            no_tui: false,
        }
    }

    #[test]
    fn the_view_needs_its_keys_from_a_terminal() {
        let all = Terminals {
            stdin: true,
            stdout: true,
            stderr: true,
        };
        let no_stdin = Terminals {
            stdin: false,
            ..all
        };
        assert_eq!(
            live(true).shown(true, false, false, all),
            (Shown::View, None)
        );
        assert_eq!(
            live(true).shown(true, false, false, no_stdin),
            (Shown::Lines, Some(NO_KEYS_NOTE))
        );
        // Unasked, a held load without keys shows the bar, and says nothing.
        assert_eq!(
            live(false).shown(true, false, false, all),
            (Shown::View, None)
        );
        assert_eq!(
            live(false).shown(true, false, false, no_stdin),
            (Shown::Bar, None)
        );
    }
}
