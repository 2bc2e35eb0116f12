//! The arguments of the subcommands that are tools beside the benchmarks: `proxy`, `merge`,
//! `diff`, `hgrm`, `completions`, `man` and `schema`. They sit with the command line that
//! holds them, so that the flags import no command.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use qbench_core::schema::SchemaKind;
use qbench_core::stats::effect::{Test, DEFAULT_TEST};
use qbench_core::Protocol;

use super::serve::ServeArgs;

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// The origin requests are relayed to: https://HOST[:PORT] (e.g. a qbench-server)
    #[arg(long, value_name = "URL")]
    pub upstream: String,

    /// Protocol of the upstream connections (h2: TCP + TLS; h3: QUIC)
    #[arg(long, value_enum, default_value = "h3")]
    pub upstream_proto: Protocol,

    /// Trust this CA for the origin (e.g. the qbench-cert.pem a qbench-server wrote)
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,

    /// Do not verify the origin's certificate
    #[arg(long, conflicts_with = "upstream_ca")]
    pub upstream_insecure: bool,

    /// Give up opening an upstream connection, or waiting for a response head, after this
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = positive_duration)]
    pub upstream_timeout: Duration,

    #[command(flatten)]
    pub serve: ServeArgs,
}

/// A duration above zero: a zero upstream timeout would answer every request 502.
fn positive_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be more than 0 (every request would time out)".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shards' run reports (`qbench --shard I/N --json FILE`), or directories of them (every
    /// *.json file in it)
    #[arg(value_name = "REPORT|DIR", required = true)]
    pub inputs: Vec<PathBuf>,

    /// Where to write the merged report (`-` for stdout)
    #[arg(short, long, value_name = "FILE")]
    pub out: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// A table for people.
    Text,
    /// A Markdown table, e.g. for a pull request.
    Markdown,
    /// Raw numbers, one row per figure.
    Csv,
    /// The diff report (`qbench schema diff`).
    Json,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier run report (`qbench --json FILE`, or `qbench merge`'s)
    #[arg(value_name = "OLD")]
    pub old: PathBuf,

    /// The later run report, compared against OLD
    #[arg(value_name = "NEW")]
    pub new: PathBuf,

    /// How to write the comparison
    #[arg(long, value_enum, default_value = "text")]
    pub format: DiffFormat,

    /// The test behind each per-run figure's verdict, as `compare --test`
    #[arg(long, value_enum, default_value_t = DEFAULT_TEST)]
    pub test: Test,

    /// Write it to this file instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HgrmArgs {
    /// A run report (`qbench --json`), or a merged one (`qbench merge`)
    #[arg(value_name = "REPORT")]
    pub report: PathBuf,

    /// Which histogram, over all runs of the report
    #[arg(long, value_enum, default_value = "latency")]
    pub of: Which,

    /// Where to write the distribution (`-` for stdout)
    #[arg(short, long, value_name = "FILE", default_value = "-")]
    pub out: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// Object latency (from the intended start at a --rate)
    #[default]
    Latency,
    Ttfb,
    /// An open loop's actual send -> last byte
    ServiceTime,
    /// An open loop's actual send - intended start
    Lag,
}

// Which clap definition each program has is the command's (`commands::manuals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Program {
    #[default]
    Qbench,
    QbenchServer,
    QbenchShaper,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, powershell or elvish
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,

    /// Which program's completions
    #[arg(long = "for", value_enum, default_value = "qbench")]
    pub program: Program,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory for the pages: qbench.1, one per subcommand (qbench-compare.1, ...),
    /// qbench-server.1, qbench-shaper.1 and its subcommands'; with `--format markdown`,
    /// qbench.md, qbench-server.md and qbench-shaper.md
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// man: roff pages for man(1); markdown: one page per program, every subcommand and
    /// flag with its help, as the book's reference holds them
    #[arg(long, value_enum, default_value = "man")]
    pub format: PageFormat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum PageFormat {
    #[default]
    Man,
    Markdown,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true))]
pub struct SchemaArgs {
    /// The document: run, merge, compare, compete, sweep-cell, cost, diff, interval (a
    /// --json-stream line) or scenario
    #[arg(value_enum, group = "what")]
    pub kind: Option<SchemaKind>,

    /// Write every schema into DIR as KIND.schema.json instead (replacing those files)
    #[arg(long, value_name = "DIR", group = "what")]
    pub dir: Option<PathBuf>,
}
