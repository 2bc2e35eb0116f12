//! Scenario files: a base configuration and axes whose cartesian product is a sweep of cells,
//! each run as a `qbench compare`. Pure: parsing, validation of names, expansion, hashing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// toml's message names the field and the line.
    #[error("{0}")]
    Parse(#[from] toml::de::Error),
    #[error("axis `{0}` is empty")]
    EmptyAxis(&'static str),
    #[error("the sweep has {0} cells; more than 10000 is surely a mistake")]
    TooMany(usize),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Compare,
    Compete,
}

impl Kind {
    pub fn command(self) -> &'static str {
        match self {
            Kind::Compare => "compare",
            Kind::Compete => "compete",
        }
    }
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

/// One point of the sweep: its axis values and the `qbench compare` arguments that run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub params: BTreeMap<String, String>,
    /// The qbench subcommand that runs the cell (`compare` or `compete`).
    #[serde(default = "compare_command")]
    pub command: String,
    pub args: Vec<String>,
    /// SHA-256 of the arguments: a finished cell whose hash matches is not run again.
    pub hash: String,
}

impl Scenario {
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
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
        let total: usize = axes.iter().map(|(_, v)| v.len()).product();
        if total > 10_000 {
            return Err(ScenarioError::TooMany(total));
        }
        let mut cells = Vec::with_capacity(total);
        for i in 0..total {
            let mut rest = i;
            let mut params = BTreeMap::new();
            for (name, values) in axes.iter().rev() {
                params.insert(name.to_string(), values[rest % values.len()].clone());
                rest /= values.len();
            }
            let args = self.args(&params);
            let command = self.kind.command().to_string();
            let key = format!("{command}\u{1f}{}", args.join("\u{1f}"));
            let hash = hex(&Sha256::digest(key.as_bytes()));
            cells.push(Cell {
                params,
                command,
                args,
                hash,
            });
        }
        Ok(cells)
    }

    fn args(&self, p: &BTreeMap<String, String>) -> Vec<String> {
        let b = &self.base;
        let mut v: Vec<String> = Vec::new();
        let mut opt = |flag: &str, val: Option<String>| {
            if let Some(val) = val {
                v.push(format!("--{flag}"));
                v.push(val);
            }
        };
        let compare = self.kind == Kind::Compare;
        if compare {
            opt("protos", p.get("protos").cloned().or(b.protos.clone()));
            opt("rounds", b.rounds.map(|r| r.to_string()));
        } else {
            opt("flows", p.get("flows").cloned().or(b.flows.clone()));
        }
        opt("proto", b.proto.clone());
        opt("objects", p.get("objects").cloned().or(b.objects.clone()));
        opt("connections", b.connections.map(|c| c.to_string()));
        opt("streams", b.streams.map(|c| c.to_string()));
        opt("cc", p.get("cc").cloned().or(b.cc.clone()));
        opt("cwnd-cap", b.cwnd_cap.map(|c| c.to_string()));
        opt("timeout", b.timeout.clone());
        for (side, s) in [("a", &b.a), ("b", &b.b)] {
            if let Some(s) = s {
                opt(&format!("{side}.cc"), s.cc.clone());
                opt(
                    &format!("{side}.cwnd-cap"),
                    s.cwnd_cap.map(|c| c.to_string()),
                );
                opt(
                    &format!("{side}.connections"),
                    s.connections.map(|c| c.to_string()),
                );
            }
        }
        opt("b.cwnd-cap", p.get("b_cwnd_cap").cloned());
        let mut link: Vec<String> = b.link.iter().cloned().collect();
        for k in ["rate", "rtt", "loss", "jitter"] {
            if let Some(val) = p.get(k) {
                link.push(format!("{k}={val}"));
            }
        }
        opt("link", (!link.is_empty()).then(|| link.join(",")));
        if p.get("zero_rtt").map(String::as_str) == Some("true") {
            v.push("--0rtt".into());
            v.push("--resume".into());
        }
        v
    }
}

fn compare_command() -> String {
    Kind::Compare.command().into()
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
    fn expands_the_matrix_in_order() {
        let s = Scenario::parse(FIG6).unwrap();
        let cells = s.cells().unwrap();
        insta::assert_snapshot!(cells
            .iter()
            .map(|c| format!("{} {}", &c.hash[..12], c.args.join(" ")))
            .collect::<Vec<_>>()
            .join("\n"));
        let mut hashes: Vec<&str> = cells.iter().map(|c| c.hash.as_str()).collect();
        hashes.dedup();
        assert_eq!(hashes.len(), 4);
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
    fn compete_cells() {
        let s = Scenario::parse("name=\"f\"\nkind=\"compete\"\n[base]\nrounds=3\nobjects=\"1x1MB\"\nlink=\"rate=5mbit\"\n[axes]\nflows=[\"h3:1,h2:1\",\"h3:1,h2:2\"]\n").unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[1].command, "compete");
        assert_eq!(
            cells[1].args[..2],
            ["--flows".to_string(), "h3:1,h2:2".to_string()]
        );
        assert!(!cells[0].args.contains(&"--rounds".to_string()));
    }

    #[test]
    fn zero_rtt_axis_adds_flags() {
        let s = Scenario::parse("name=\"x\"\n[base]\nproto=\"h3\"\n[axes]\nzero_rtt=[false,true]\nb_cwnd_cap=[430,2000]\n").unwrap();
        let cells = s.cells().unwrap();
        assert_eq!(cells.len(), 4);
        assert!(cells[0]
            .args
            .ends_with(&["--b.cwnd-cap".into(), "430".into()]));
        assert!(cells[1].args.contains(&"--0rtt".to_string()));
    }
}
