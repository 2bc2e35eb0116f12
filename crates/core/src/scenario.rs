//! Scenario files: a base configuration and axes whose cartesian product is a sweep of cells,
//! each a typed `compare` or `compete` spec. Pure: parsing, validation, expansion, hashing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::link::{parse_duration, LinkSpec};
use crate::spec::{parse_flows, CompareSpec, CompeteSpec, RunSpec, SideOverrides};
use crate::wire::{CcAlgo, Protocol};
use crate::workload::Workload;

/// Most cells a sweep may have: more is surely a mistake, and every cell is validated (and
/// its spec hashed) before the first one runs.
pub const MAX_CELLS: u64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// toml's message names the field and the line.
    #[error("{0}")]
    Parse(#[from] toml::de::Error),
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Compare,
    Compete,
}

/// Options shared by every cell; names follow `qbench compare`'s flags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    pub protos: Option<String>,
    /// `compete` flows, e.g. "h3:1,h2:2".
    pub flows: Option<String>,
    pub proto: Option<String>,
    pub objects: Option<String>,
    pub rounds: Option<u32>,
    pub link: Option<String>,
    pub connections: Option<u32>,
    pub streams: Option<u32>,
    pub cc: Option<String>,
    pub cwnd_cap: Option<u32>,
    pub timeout: Option<String>,
    pub a: Option<SideBase>,
    pub b: Option<SideBase>,
}

/// Per-side overrides (`--a.cc`, `--b.cwnd-cap`, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideBase {
    pub cc: Option<String>,
    pub cwnd_cap: Option<u32>,
    pub connections: Option<u32>,
}

/// Values to sweep. Link axes are appended to the base link spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axes {
    pub rate: Option<Vec<String>>,
    pub rtt: Option<Vec<String>>,
    pub loss: Option<Vec<String>>,
    pub jitter: Option<Vec<String>>,
    pub objects: Option<Vec<String>>,
    pub protos: Option<Vec<String>>,
    pub flows: Option<Vec<String>>,
    pub cc: Option<Vec<String>>,
    pub b_cwnd_cap: Option<Vec<u32>>,
    pub zero_rtt: Option<Vec<bool>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// How a cell runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        Ok(toml::from_str(text)?)
    }

    fn axis_values(&self) -> Result<Vec<(&'static str, Vec<String>)>, ScenarioError> {
        let a = &self.axes;
        let s = |v: &Option<Vec<String>>| v.clone();
        let n = |v: &Option<Vec<u32>>| v.as_ref().map(|x| x.iter().map(u32::to_string).collect());
        let b = |v: &Option<Vec<bool>>| v.as_ref().map(|x| x.iter().map(bool::to_string).collect());
        let all: Vec<(&'static str, Option<Vec<String>>)> = vec![
            ("protos", s(&a.protos)),
            ("flows", s(&a.flows)),
            ("cc", s(&a.cc)),
            ("b_cwnd_cap", n(&a.b_cwnd_cap)),
            ("zero_rtt", b(&a.zero_rtt)),
            ("rate", s(&a.rate)),
            ("rtt", s(&a.rtt)),
            ("loss", s(&a.loss)),
            ("jitter", s(&a.jitter)),
            ("objects", s(&a.objects)),
        ];
        let mut out = Vec::new();
        for (name, v) in all {
            if let Some(v) = v {
                if v.is_empty() {
                    return Err(ScenarioError::EmptyAxis(name));
                }
                out.push((name, v));
            }
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
        let mut cells = Vec::with_capacity(total);
        for i in 0..total {
            let mut rest = i;
            let mut params = BTreeMap::new();
            for (name, values) in axes.iter().rev() {
                params.insert(name.to_string(), values[rest % values.len()].clone());
                rest /= values.len();
            }
            let spec = self.spec(&params)?;
            cells.push(Cell {
                params,
                hash: spec.hash(),
                spec,
            });
        }
        Ok(cells)
    }

    fn spec(&self, p: &BTreeMap<String, String>) -> Result<CellSpec, ScenarioError> {
        let b = &self.base;
        let pick = |axis: &str, base: &Option<String>| p.get(axis).cloned().or(base.clone());
        let mut run = RunSpec::default();
        if let Some(v) = &b.proto {
            run.proto = v.parse().map_err(|e| field("base.proto", e))?;
        }
        if let Some(v) = pick("objects", &b.objects) {
            let w: Workload = v.parse().map_err(|e| field("objects", e))?;
            run.objects = Some(w);
        }
        run.connections = b.connections.unwrap_or(run.connections);
        run.streams = b.streams.or(run.streams);
        if let Some(v) = pick("cc", &b.cc) {
            run.cc = Some(v.parse::<CcAlgo>().map_err(|e| field("cc", e))?);
        }
        run.cwnd_cap = b.cwnd_cap.or(run.cwnd_cap);
        if let Some(v) = &b.timeout {
            run.timeout =
                parse_duration("base.timeout", v).map_err(|e| field("base.timeout", e))?;
        }
        let mut link: Vec<String> = b.link.iter().cloned().collect();
        for k in ["rate", "rtt", "loss", "jitter"] {
            if let Some(val) = p.get(k) {
                link.push(format!("{k}={val}"));
            }
        }
        if !link.is_empty() {
            let spec: LinkSpec = link.join(",").parse().map_err(|e| field("link", e))?;
            run.link = Some(spec);
        }
        if p.get("zero_rtt").map(String::as_str) == Some("true") {
            run.zero_rtt = true;
            run.resume = true;
        }
        Ok(match self.kind {
            Kind::Compare => {
                let protos = match pick("protos", &b.protos) {
                    Some(v) => parse_protos(&v)?,
                    None => (run.proto, run.proto),
                };
                let side =
                    |s: &Option<SideBase>, name: &str| -> Result<SideOverrides, ScenarioError> {
                        let Some(s) = s else {
                            return Ok(SideOverrides::default());
                        };
                        Ok(SideOverrides {
                            cc: s
                                .cc
                                .as_deref()
                                .map(str::parse::<CcAlgo>)
                                .transpose()
                                .map_err(|e| field(&format!("base.{name}.cc"), e))?,
                            cwnd_cap: s.cwnd_cap,
                            connections: s.connections,
                            ..SideOverrides::default()
                        })
                    };
                let mut b_side = side(&b.b, "b")?;
                if let Some(v) = p.get("b_cwnd_cap") {
                    b_side.cwnd_cap = Some(v.parse().map_err(|e| field("b_cwnd_cap", e))?);
                }
                CellSpec::Compare(CompareSpec {
                    rounds: b.rounds.unwrap_or(DEFAULT_ROUNDS),
                    a: side(&b.a, "a")?,
                    b: b_side,
                    protos,
                    base: run,
                })
            }
            Kind::Compete => {
                let flows = pick("flows", &b.flows).ok_or_else(|| {
                    field("flows", "a competition needs base.flows or a flows axis")
                })?;
                CellSpec::Compete(CompeteSpec {
                    flows: parse_flows(&flows).map_err(|e| field("flows", e))?,
                    base: run,
                })
            }
        })
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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIG6: &str = r#"
name = "imc17-fig6a-small"
[base]
protos = "h2,h3"
rounds = 10
link = "queue=50ms"
[axes]
rate = ["5mbit", "100mbit"]
objects = ["1x5KB", "1x10MB"]
"#;

    #[test]
    fn cell_counts_are_checked_not_wrapped() {
        let axis = |name: &str, f: &dyn Fn(usize) -> String| {
            let v: Vec<String> = (0..256).map(|i| format!("\"{}\"", f(i))).collect();
            format!("{name} = [{}]\n", v.join(", "))
        };
        let mut text = "name = \"huge\"\n[base]\nprotos = \"h2,h3\"\n[axes]\n".to_string();
        text += &axis("rate", &|i| format!("{}kbit", 8 + i));
        text += &axis("rtt", &|i| format!("{}ms", 1 + i));
        text += &axis("loss", &|i| format!("{}%", i % 50));
        text += &axis("jitter", &|i| format!("{i}ms"));
        text += &axis("objects", &|i| format!("{}x1KB", 1 + i));
        text += &axis("cc", &|i| ["cubic", "bbr"][i % 2].to_string());
        text += &axis("flows", &|i| format!("h2:{}", 1 + i % 3));
        text += &format!(
            "b_cwnd_cap = [{}]\n",
            (1..=256)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let s = Scenario::parse(&text).unwrap();
        let e = s.cells().unwrap_err();
        assert!(matches!(e, ScenarioError::TooMany(None)), "{e}");
        assert!(e.to_string().contains("2^64 or more"), "{e}");
        let small = Scenario::parse(&text.replace("b_cwnd_cap", "# b_cwnd_cap")).unwrap();
        assert!(matches!(
            small.cells(),
            Err(ScenarioError::TooMany(Some(_)))
        ));
    }

    #[test]
    fn expands_the_matrix_in_order() {
        let s = Scenario::parse(FIG6).unwrap();
        let cells = s.cells().unwrap();
        let order: Vec<String> = cells
            .iter()
            .map(|c| format!("{} {}", c.params["rate"], c.params["objects"]))
            .collect();
        assert_eq!(
            order,
            [
                "5mbit 1x5KB",
                "5mbit 1x10MB",
                "100mbit 1x5KB",
                "100mbit 1x10MB"
            ]
        );
        let c = cells[3].spec.as_compare().expect("a compare cell");
        assert_eq!(c.protos, (Protocol::H2, Protocol::H3));
        assert_eq!(c.rounds, 10);
        assert_eq!(c.base.objects.as_ref().unwrap().to_string(), "1x10MB");
        assert_eq!(
            c.base.link.as_ref().unwrap().text,
            "queue=50ms,rate=100mbit"
        );
        let mut hashes: Vec<&str> = cells.iter().map(|c| c.hash.as_str()).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 4, "every cell has its own hash");
    }

    /// The hash is over the typed spec's serialized form alone: no flag name enters it, so
    /// renaming a command-line flag cannot change it. The value is pinned so that a change
    /// to the spec's serialized form (which does invalidate finished cells) is seen here.
    #[test]
    fn cell_hash_is_the_spec_and_nothing_else() {
        let cells = Scenario::parse(FIG6).unwrap().cells().unwrap();
        let c = &cells[0];
        assert_eq!(c.hash, c.spec.hash());
        let canonical = serde_json::to_vec(&c.spec).unwrap();
        assert_eq!(c.hash, hex(&Sha256::digest(&canonical)));
        let round_trip: CellSpec = serde_json::from_slice(&canonical).unwrap();
        assert_eq!(round_trip.hash(), c.hash);
        assert_eq!(
            c.hash,
            "8c9d021bbdcc7b23c91025a60557f138ab67c853a92b728b7c03950b9d3aad2d"
        );
    }

    #[test]
    fn unknown_fields_name_field_and_line() {
        let err = Scenario::parse("name = \"x\"\n[base]\nprotos = \"h2,h3\"\nbandwidth = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bandwidth") && err.contains("line 4"), "{err}");
        let err = Scenario::parse("name = \"x\"\n[base]\n[axes]\nrate = []\n").unwrap();
        assert!(matches!(err.cells(), Err(ScenarioError::EmptyAxis("rate"))));
    }

    #[test]
    fn bad_values_name_their_field() {
        for (toml, want) in [
            (
                "[base]\nprotos = \"h2,h4\"",
                "protos: `h4` is not h1, h2 or h3",
            ),
            ("[base]\nprotos = \"h2\"", "protos: `h2`: give exactly two"),
            ("[base]\ncc = \"vegas\"", "cc: `vegas` is not cubic"),
            ("[base]\nobjects = \"5x\"", "objects:"),
            ("[base]\nlink = \"rate=fast\"", "link:"),
            ("[base]\ntimeout = \"10\"", "base.timeout:"),
            (
                "kind = \"compete\"\n[base]\nflows = \"h3:0\"",
                "flows: `h3:0`",
            ),
            ("kind = \"compete\"\n[base]", "flows: a competition needs"),
        ] {
            let s = Scenario::parse(&format!("name = \"x\"\n{toml}\n")).unwrap();
            let err = s.cells().unwrap_err().to_string();
            assert!(err.starts_with(want), "{toml}: {err}");
        }
    }

    #[test]
    fn compete_cells() {
        let s = Scenario::parse("name=\"f\"\nkind=\"compete\"\n[base]\nrounds=3\nobjects=\"1x1MB\"\nlink=\"rate=5mbit\"\n[axes]\nflows=[\"h3:1,h2:1\",\"h3:1,h2:2\"]\n").unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 2);
        let c = cells[1].spec.as_compete().expect("a compete cell");
        assert_eq!(c.flows, vec![(Protocol::H3, 1), (Protocol::H2, 2)]);
        assert!(c.base.link.is_some());
    }

    #[test]
    fn zero_rtt_and_cap_axes_set_their_fields() {
        let s = Scenario::parse("name=\"x\"\n[base]\nproto=\"h3\"\n[axes]\nzero_rtt=[false,true]\nb_cwnd_cap=[430,2000]\n").unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 4);
        let spec = |i: usize| cells[i].spec.as_compare().expect("a compare cell").clone();
        // The last axis varies fastest.
        assert_eq!(spec(0).b.cwnd_cap, Some(430));
        assert!(!spec(0).base.zero_rtt && !spec(0).base.resume);
        assert!(spec(1).base.zero_rtt && spec(1).base.resume);
        assert_eq!(spec(2).b.cwnd_cap, Some(2000));
        assert_eq!(spec(0).protos, (Protocol::H3, Protocol::H3));
    }

    proptest::proptest! {
        #[test]
        fn scenario_parser_never_panics(text in "\\PC{0,200}") {
            if let Ok(s) = Scenario::parse(&text) {
                let _ = s.cells();
            }
        }
    }
}
