//! Scenario files: a base configuration and axes whose cartesian product is a sweep of cells,
//! each a typed `compare` or `compete` spec. Pure: parsing, validation, expansion, hashing.

pub mod cell;
pub mod duration;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::spec::cpulimit::CpuQuota;
use crate::spec::link::parse_duration;
use crate::spec::load::{parse_rate, Arrivals, Load, DEFAULT_MAX_INFLIGHT};
use crate::spec::{CompareSpec, CompeteSpec, ProxyChoice};
use crate::stats::metric::Metric;
use crate::stats::rounds::{
    parse_precision, AutoRounds, RoundsError, MAX_ROUNDS, MIN_ROUNDS, PRECISION_PCT,
};
use crate::wire::Protocol;

mod apps;
mod axis_lines;
mod lower;
pub mod toml_error;
pub use apps::VideoTable;

/// Most cells a sweep may have: more is surely a mistake, and every cell is validated (and
/// its spec hashed) before the first one runs.
pub const MAX_CELLS: u64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Where, what, the nearest valid name, and the line with a caret under the word.
    #[error(transparent)]
    Parse(#[from] toml_error::TomlError),
    #[error("axis `{0}` is empty")]
    EmptyAxis(&'static str),
    #[error("the axes make {} cells; a sweep has at most {MAX_CELLS}", .0.map_or_else(|| "2^64 or more".to_string(), |n| n.to_string()))]
    TooMany(Option<u64>),
    #[error("{field}: {message}")]
    Field { field: String, message: String },
}

fn field(field: &str, message: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::Field {
        field: field.to_string(),
        message: message.to_string(),
    }
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Compare,
    Compete,
}

/// `rounds = 10` or `rounds = "auto"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RoundsField {
    Count(u32),
    Word(String),
}

/// Options shared by every cell; names follow `qbench compare`'s flags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Base {
    pub protos: Option<String>,
    /// `compete` flows, e.g. "h3:1,h2:2".
    pub flows: Option<String>,
    pub proto: Option<String>,
    pub objects: Option<String>,
    /// A number, or "auto" (as `--rounds auto`, with `min_rounds`, `max_rounds` and
    /// `precision`).
    pub rounds: Option<RoundsField>,
    pub min_rounds: Option<u32>,
    pub max_rounds: Option<u32>,
    /// "2%": with `rounds = "auto"`, the half-width of the relative difference's interval.
    pub precision: Option<String>,
    /// The test comparison cells are judged by (as `--test`); Welch's when absent, so that
    /// scenario files written before keep their verdicts. Not part of a cell's hash.
    pub test: Option<crate::stats::effect::Test>,
    /// The client's segment: the link axes (rate, rtt, loss, jitter) are added to it.
    pub link: Option<String>,
    /// As `--link-b`: the server's segment, beyond a middle host.
    pub link_b: Option<String>,
    /// As `--proxy` (h2, h3): through `qbench proxy` on the middle host.
    pub proxy: Option<ProxyChoice>,
    pub connections: Option<u32>,
    /// As `--client-threads`; a `threads` axis value overrides it.
    pub client_threads: Option<u32>,
    /// As `--server-threads`; a `threads` axis value overrides it.
    pub server_threads: Option<u32>,
    /// As `--server-cpu` (e.g. "0.2/100ms", "deadline:0.2/100ms").
    pub server_cpu: Option<String>,
    pub streams: Option<u32>,
    pub cc: Option<String>,
    pub cwnd_cap: Option<u32>,
    /// As `--reorder-threshold`.
    pub reorder_threshold: Option<u32>,
    /// As `--quic` (e.g. "gso=off"); a `quic` axis value overrides it key by key.
    pub quic: Option<String>,
    /// As `--reorder-time-threshold` (RTTs, e.g. 4.0).
    pub reorder_time_threshold: Option<f64>,
    /// As `--client-cpu` (a share of one core, e.g. 0.25).
    pub client_cpu: Option<CpuQuota>,
    /// As `--client-cpuset` (e.g. "1").
    pub client_cpuset: Option<String>,
    pub timeout: Option<String>,
    /// Hold a load in every cell (as `--duration`, e.g. "30s"), after `warmup`.
    pub duration: Option<String>,
    pub warmup: Option<String>,
    /// Open loop: requests per second (as `--rate`; `rate` is the link's).
    pub request_rate: Option<String>,
    pub arrivals: Option<Arrivals>,
    pub max_inflight: Option<u32>,
    /// What comparison cells are judged by (as `--metric`); not part of a cell's hash, since
    /// it changes the verdict and not what runs.
    pub metric: Option<Metric>,
    pub a: Option<SideBase>,
    pub b: Option<SideBase>,
    /// A HAR file (relative to the scenario file) to replay, as `--page`.
    pub page: Option<String>,
    /// As `--client` (curl, h2load, ngtcp2, quic-go, chromium, exec:TEMPLATE): a
    /// third-party program fetches the objects of both sides.
    pub client: Option<String>,
    /// As `--verify`: every body checked byte for byte against what the server was given.
    pub verify: Option<bool>,
    /// As `--server` (caddy, nginx, quic-go, ngtcp2, hypercorn, exec:TEMPLATE): a
    /// third-party program serves both sides' objects behind the link.
    pub server: Option<String>,
}

/// Per-side overrides (`--a.cc`, `--b.cwnd-cap`, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideBase {
    pub cc: Option<String>,
    pub cwnd_cap: Option<u32>,
    pub connections: Option<u32>,
    /// This side's share of a core, or "none".
    pub client_cpu: Option<CpuQuota>,
    /// This side's proxy (h2, h3), or "none" (direct).
    pub proxy: Option<ProxyChoice>,
    /// This side's client (as `--a.client`), or "qbench".
    pub client: Option<String>,
    /// This side's server (as `--a.server`), or "qbench".
    pub server: Option<String>,
}

/// Values to sweep. Link axes are appended to the base link spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Axes {
    /// The whole client link (as `--link`, e.g. "mtu=1500" for an unshaped namespace link),
    /// or "none" for loopback; the other link axes are added to it.
    pub link: Option<Vec<String>>,
    /// The link's rate.
    pub rate: Option<Vec<String>>,
    /// Open-loop requests per second (needs `base.duration`).
    pub request_rate: Option<Vec<String>>,
    pub rtt: Option<Vec<String>>,
    pub loss: Option<Vec<String>>,
    pub jitter: Option<Vec<String>>,
    pub objects: Option<Vec<String>>,
    pub protos: Option<Vec<String>>,
    pub flows: Option<Vec<String>>,
    pub cc: Option<Vec<String>>,
    pub b_cwnd_cap: Option<Vec<u32>>,
    /// Connections of each side (as `--connections`).
    pub connections: Option<Vec<u32>>,
    /// Worker threads of the client's runtime and of the in-process server's, together (as
    /// `--client-threads N --server-threads N`): with `connections`, how a run scales with
    /// cores.
    pub threads: Option<Vec<u32>>,
    pub zero_rtt: Option<Vec<bool>>,
    /// `--reorder-threshold` of both sides (QUIC's packet threshold, TCP's tcp_reordering).
    pub reorder_threshold: Option<Vec<u32>>,
    /// `--quic` settings (e.g. "ack-frequency=10"), over `base.quic`; QUIC sides only.
    pub quic: Option<Vec<String>>,
    /// `--client-cpu` of both sides: shares of a core, or "none" for an unrestricted client.
    pub client_cpu: Option<Vec<CpuQuota>>,
    /// `--server-cpu`: the in-process server's share of a core in slices (e.g.
    /// "0.2/100ms", "deadline:0.2/100ms"), or "none".
    pub server_cpu: Option<Vec<String>>,
    /// The `[video]` table's quality: "abr" or one of its bitrates.
    pub video_quality: Option<Vec<String>>,
    /// HAR files (relative to the scenario file) to replay.
    pub page: Option<Vec<String>>,
    /// Both sides' client and protocol, as "A,B" with each side `CLIENT-PROTO` (e.g.
    /// "curl-h2,ngtcp2-h3", "qbench-h3,chromium-h3"); instead of a `protos` axis.
    pub clients: Option<Vec<String>>,
    /// The server program of both sides (as `--server`): "qbench", "caddy", ...
    pub server: Option<Vec<String>>,
    /// Both sides' server and protocol, as "A,B" with each side `SERVER-PROTO` (e.g.
    /// "qbench-h3,caddy-h3"); instead of a `protos` axis.
    pub servers: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// `compare` (two configurations, back to back; the default) or `compete` (flows at once
    /// through one bottleneck, from `base.flows` or the `flows` axis).
    #[serde(default)]
    pub kind: Kind,
    pub description: Option<String>,
    pub base: Base,
    #[serde(default)]
    pub axes: Axes,
    /// Every cell plays this video instead of fetching objects.
    pub video: Option<VideoTable>,
    /// The pages named by `base.page` and the `page` axis, as the caller read them.
    #[serde(skip)]
    pub pages: BTreeMap<String, crate::page::PageSpec>,
    /// Where the axis values sit in the file, for errors.
    #[serde(skip)]
    pub axis_lines: axis_lines::AxisLines,
}

/// How a cell runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
// A sweep holds a few dozen cells, made once: boxing a side's spec would save nothing that
// counts and cost every match a dereference.
#[allow(clippy::large_enum_variant)]
pub enum CellSpec {
    Compare(CompareSpec),
    Compete(CompeteSpec),
}

impl CellSpec {
    pub fn as_compare(&self) -> Option<&CompareSpec> {
        match self {
            Self::Compare(c) => Some(c),
            Self::Compete(_) => None,
        }
    }

    pub fn as_compete(&self) -> Option<&CompeteSpec> {
        match self {
            Self::Compete(c) => Some(c),
            Self::Compare(_) => None,
        }
    }

    /// SHA-256 (hex) of the spec's serialized form: a cell is identified by what it measures,
    /// whatever the command-line flags that set it are called.
    pub fn hash(&self) -> String {
        let canonical = serde_json::to_vec(self).unwrap_or_default();
        hex(&Sha256::digest(&canonical))
    }
}

/// One point of the sweep: its axis values and what runs there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub params: BTreeMap<String, String>,
    pub spec: CellSpec,
    /// `spec.hash()`: a finished cell whose hash matches is not run again.
    pub hash: String,
}

impl Cell {
    /// How a cell is named: its axis values as `k=v` pairs.
    pub fn label(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Scenario {
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let mut scenario: Self =
            toml::from_str(text).map_err(|e| toml_error::TomlError::new(&e, text))?;
        scenario.axis_lines = axis_lines::AxisLines::of(text);
        Ok(scenario)
    }

    fn axis_values(&self) -> Result<Vec<(&'static str, Vec<String>)>, ScenarioError> {
        let given = fields(&self.axes)?;
        let mut out = Vec::new();
        for &name in AXES {
            let Some(serde_json::Value::Array(values)) = given.get(name) else {
                continue;
            };
            if values.is_empty() {
                return Err(ScenarioError::EmptyAxis(name));
            }
            let values = values
                .iter()
                .map(|v| scalar(v).unwrap_or_else(|| v.to_string()))
                .collect();
            out.push((name, values));
        }
        Ok(out)
    }

    /// The cartesian product of the axes, in a fixed order (the last axis varies fastest).
    pub fn cells(&self) -> Result<Vec<Cell>, ScenarioError> {
        let axes = self.axis_values()?;
        let total = axes
            .iter()
            .try_fold(1u64, |n, (_, v)| n.checked_mul(v.len() as u64));
        let total = match total {
            Some(n) if n <= MAX_CELLS => n as usize,
            other => return Err(ScenarioError::TooMany(other)),
        };
        let mut cells: Vec<Cell> = Vec::with_capacity(total);
        // Two axis values that make one experiment ("1x1KB" and "1000B", or a value given
        // twice) would run once but count twice in the false discovery rate.
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..total {
            let mut rest = i;
            let mut params = BTreeMap::new();
            for (name, values) in axes.iter().rev() {
                params.insert(name.to_string(), values[rest % values.len()].clone());
                rest /= values.len();
            }
            let spec = self
                .spec(&params)
                .map_err(|e| self.axis_lines.locate(e, &params, &axes))?;
            let cell = Cell {
                params,
                hash: spec.hash(),
                spec,
            };
            if let Some(&other) = seen.get(&cell.hash) {
                return Err(field(
                    "axes",
                    format!(
                        "cells `{}` and `{}` are the same experiment: give each axis value once",
                        cells[other].label(),
                        cell.label()
                    ),
                ));
            }
            seen.insert(cell.hash.clone(), cells.len());
            cells.push(cell);
        }
        Ok(cells)
    }
}

impl Scenario {
    /// What comparison cells are judged by unless `qbench report --metric` says otherwise.
    pub fn metric(&self) -> Option<Metric> {
        self.base.metric
    }

    /// The test comparison cells are judged by: `qbench compare`'s default unless the file
    /// names another.
    pub fn test(&self) -> crate::stats::effect::Test {
        self.base.test.unwrap_or(crate::stats::effect::DEFAULT_TEST)
    }

    /// Rounds per cell, at most with `rounds = "auto"`, and the rule that may stop them.
    fn rounds(&self) -> Result<(u32, Option<AutoRounds>), ScenarioError> {
        let b = &self.base;
        let auto = match &b.rounds {
            None => false,
            Some(RoundsField::Count(n)) => {
                if *n < 2 {
                    return Err(field("base.rounds", "at least 2"));
                }
                false
            }
            Some(RoundsField::Word(w)) if w == "auto" => true,
            Some(RoundsField::Word(w)) => {
                return Err(field("base.rounds", format!("`{w}`: a number or \"auto\"")))
            }
        };
        if !auto {
            for (name, given) in [
                ("base.min_rounds", b.min_rounds.is_some()),
                ("base.max_rounds", b.max_rounds.is_some()),
                ("base.precision", b.precision.is_some()),
            ] {
                if given {
                    return Err(field(name, "only with rounds = \"auto\""));
                }
            }
            let n = match b.rounds {
                Some(RoundsField::Count(n)) => n,
                _ => DEFAULT_ROUNDS,
            };
            return Ok((n, None));
        }
        let precision = match &b.precision {
            Some(p) => parse_precision(p).map_err(|_| {
                field(
                    "base.precision",
                    format!("`{p}`: a percentage above 0 and at most 100"),
                )
            })?,
            None => PRECISION_PCT,
        };
        let rule = AutoRounds::new(
            b.min_rounds.unwrap_or(MIN_ROUNDS),
            b.max_rounds.unwrap_or(MAX_ROUNDS),
            precision,
        )
        .map_err(|e| match e {
            RoundsError::Min(_) => field("base.min_rounds", "at least 2"),
            RoundsError::Max { .. } => field("base.max_rounds", "at least min_rounds"),
            RoundsError::Precision(_) => field("base.precision", e),
        })?;
        Ok((rule.max, Some(rule)))
    }

    /// The held load of every cell, at `rate` (from the base or the axis).
    fn load(&self, rate: Option<String>) -> Result<Option<Load>, ScenarioError> {
        let b = &self.base;
        let Some(d) = &b.duration else {
            let refines = [
                ("base.warmup", b.warmup.is_some()),
                ("request_rate", rate.is_some()),
                ("base.arrivals", b.arrivals.is_some()),
                ("base.max_inflight", b.max_inflight.is_some()),
            ];
            return match refines.into_iter().find(|(_, given)| *given) {
                Some((name, _)) => Err(field(name, "needs base.duration")),
                None => Ok(None),
            };
        };
        let time = |name: &str, v: &str| parse_duration(name, v).map_err(|e| field(name, e));
        let rate = rate
            .map(|r| parse_rate(&r).map_err(|e| field("request_rate", e)))
            .transpose()?;
        if rate.is_none() {
            for (name, given) in [
                ("base.arrivals", b.arrivals.is_some()),
                ("base.max_inflight", b.max_inflight.is_some()),
            ] {
                if given {
                    return Err(field(name, "needs request_rate"));
                }
            }
        }
        let load = Load {
            duration: time("base.duration", d)?,
            warmup: b
                .warmup
                .as_deref()
                .map(|w| time("base.warmup", w))
                .transpose()?
                .unwrap_or_default(),
            rate,
            arrivals: b.arrivals.unwrap_or_default(),
            max_inflight: b.max_inflight.unwrap_or(DEFAULT_MAX_INFLIGHT),
        };
        load.check().map_err(|(flag, message)| {
            let name = match flag {
                "--rate" => "request_rate".to_string(),
                f => format!("base.{}", f.trim_start_matches("--").replace('-', "_")),
            };
            field(&name, message)
        })?;
        Ok(Some(load))
    }
}

/// Rounds of a comparison when the scenario does not say (as `qbench compare`).
pub const DEFAULT_ROUNDS: u32 = 10;

fn parse_protos(v: &str) -> Result<(Protocol, Protocol), ScenarioError> {
    let list: Vec<&str> = v.split(',').collect();
    let [a, b] = list.as_slice() else {
        return Err(field("protos", format!("`{v}`: give exactly two, as A,B")));
    };
    let p = |s: &str| s.parse::<Protocol>().map_err(|e| field("protos", e));
    Ok((p(a)?, p(b)?))
}

/// The axes in the order cells are made (the last varies fastest): every field of `Axes`.
const AXES: &[&str] = &[
    "protos",
    "clients",
    "servers",
    "server",
    "flows",
    "cc",
    "b_cwnd_cap",
    "zero_rtt",
    "reorder_threshold",
    "quic",
    "client_cpu",
    "server_cpu",
    "request_rate",
    "threads",
    "connections",
    "link",
    "rate",
    "rtt",
    "loss",
    "jitter",
    "objects",
    "video_quality",
    "page",
];

/// A table's fields by name, as the file gave them (absent ones left out), for the loops
/// that lower them through the knob table.
fn fields<T: Serialize>(table: &T) -> Result<BTreeMap<String, serde_json::Value>, ScenarioError> {
    match serde_json::to_value(table).map_err(|e| field("scenario", e))? {
        serde_json::Value::Object(m) => Ok(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        _ => Ok(BTreeMap::new()),
    }
}

/// A field's value as a flag takes it: text as it is, numbers and booleans printed.
fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) => f.to_string(),
            _ => n.to_string(),
        }),
        _ => None,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod knob_fields_tests;
#[cfg(test)]
mod servers_tests;
#[cfg(test)]
mod tests;
