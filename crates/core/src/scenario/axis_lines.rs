//! Where each axis value sits in its scenario file, so that a value that makes a bad cell is
//! named with its line, as a parse error is.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{field, ScenarioError};

/// `axes.NAME` -> the line of each of its values. Not part of what a scenario is: two
/// scenarios that differ only in layout are equal.
#[derive(Debug, Clone, Default)]
pub struct AxisLines(BTreeMap<String, Vec<usize>>);

impl PartialEq for AxisLines {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Deserialize)]
struct Shadow {
    #[serde(default)]
    axes: BTreeMap<String, Vec<toml::Spanned<toml::Value>>>,
}

impl AxisLines {
    /// The lines of `text`'s axis values; empty when the text does not hold them as lists
    /// (the scenario's own parse has said why by then).
    pub fn of(text: &str) -> Self {
        let Ok(shadow) = toml::from_str::<Shadow>(text) else {
            return Self::default();
        };
        let line = |at: usize| text.get(..at).map_or(0, |t| t.matches('\n').count()) + 1;
        Self(
            shadow
                .axes
                .into_iter()
                .map(|(k, v)| (k, v.iter().map(|s| line(s.span().start)).collect()))
                .collect(),
        )
    }

    /// `error`, for the cell made of `params` (axis -> value, with `values` each axis's
    /// values in file order), led by the line and axis of the value it quotes; as it is when
    /// it quotes none (a `[base]` field's error names that field).
    pub fn locate(
        &self,
        error: ScenarioError,
        params: &BTreeMap<String, String>,
        values: &[(&'static str, Vec<String>)],
    ) -> ScenarioError {
        let text = error.to_string();
        // The longest value the message quotes ("`1x10QB`", not a "1" beside it), else the
        // axis whose name leads the message ("threads: 1 to 256").
        let lead = text.split(':').next().unwrap_or("");
        let quoted = params
            .iter()
            .filter(|(_, v)| !v.is_empty() && text.contains(&format!("`{v}`")))
            .max_by_key(|(_, v)| v.len())
            .or_else(|| params.iter().find(|(k, _)| k.as_str() == lead));
        match quoted {
            Some((name, value)) => {
                let index = values
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, vs)| vs.iter().position(|v| v == value));
                let line = index.and_then(|i| self.0.get(name.as_str())?.get(i).copied());
                let at = match line {
                    Some(l) => format!("line {l}: axes.{name} value `{value}`"),
                    None => format!("axes.{name} value `{value}`"),
                };
                field(&at, text)
            }
            None => error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;

    /// A bad value in an axis is named with its line, its axis and itself, as a parse error is;
    /// the same value in `[base]` keeps its field's name.
    #[test]
    fn bad_axis_values_name_their_line() {
        let text = "name = \"x\"\n[base]\nprotos = \"h2,h3\"\n[axes]\nrate = [\n  \"20mbit\",\n  \"100mbitz\",\n]\nobjects = [\"1x10KB\", \"1x10QB\"]\n";
        let s = Scenario::parse(&text.replace("1x10QB", "1x20KB")).unwrap();
        let err = s.cells().unwrap_err().to_string();
        assert!(
            err.starts_with("line 7: axes.rate value `100mbitz`: ") && err.contains("mbitz"),
            "{err}"
        );
        let fixed = text.replace("100mbitz", "100mbit");
        let err = Scenario::parse(&fixed)
            .unwrap()
            .cells()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("line 9: axes.objects value `1x10QB`: "),
            "{err}"
        );
        // Layout is not part of what a scenario is.
        assert_eq!(
            Scenario::parse(&fixed).unwrap(),
            Scenario::parse(&fixed.replace("[\n  ", "[")).unwrap()
        );
    }
}
