//! JSON Schemas (draft 2020-12) of every document qbench writes, generated from the types that
//! write them, so a schema cannot describe a field the report does not have.
//!
//! Objects are closed (`additionalProperties: false`): a field the schema lacks is an error
//! when a report is validated, which is what makes validating real reports catch a type that
//! changed without its schema.

use schemars::generate::SchemaSettings;
use schemars::transform::{transform_subschemas, Transform};
use schemars::Schema;
use serde_json::{json, Value};

/// A document qbench writes (or, for `Scenario`, reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SchemaKind {
    /// `qbench --json`: a run report.
    Run,
    /// `qbench merge -o`: a run report that adds up shards (`merged` present).
    Merge,
    /// `qbench compare --json`.
    Compare,
    /// `qbench compete --json`.
    Compete,
    /// A cell file of `qbench sweep --out DIR`.
    SweepCell,
    /// `qbench cost --json`.
    Cost,
    /// `qbench diff --format json`.
    Diff,
    /// One line of `--json-stream`.
    Interval,
    /// A scenario file of `qbench sweep` (TOML, checked as the data it parses to).
    Scenario,
}

impl SchemaKind {
    pub const ALL: [Self; 9] = [
        Self::Run,
        Self::Merge,
        Self::Compare,
        Self::Compete,
        Self::SweepCell,
        Self::Cost,
        Self::Diff,
        Self::Interval,
        Self::Scenario,
    ];

    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Merge => "merge",
            Self::Compare => "compare",
            Self::Compete => "compete",
            Self::SweepCell => "sweep-cell",
            Self::Cost => "cost",
            Self::Diff => "diff",
            Self::Interval => "interval",
            Self::Scenario => "scenario",
        }
    }

    /// `docs/schema/<this>`.
    pub fn file_name(self) -> String {
        format!("{}.schema.json", self.name())
    }

    /// The `schema` tag and version the document carries, for those that carry one.
    pub fn tag(self) -> Option<(&'static str, u32)> {
        match self {
            Self::Run | Self::Merge => Some((crate::report::SCHEMA, crate::report::SCHEMA_VERSION)),
            Self::Compare => Some((
                crate::report::compare::SCHEMA,
                crate::report::compare::SCHEMA_VERSION,
            )),
            Self::Compete => Some((
                crate::report::compete::SCHEMA,
                crate::report::compete::SCHEMA_VERSION,
            )),
            Self::SweepCell => Some((
                crate::scenario::cell::SCHEMA,
                crate::scenario::cell::SCHEMA_VERSION,
            )),
            Self::Cost => Some((
                crate::stats::cost::SCHEMA,
                crate::stats::cost::SCHEMA_VERSION,
            )),
            Self::Diff => Some((
                crate::report::diff::SCHEMA,
                crate::report::diff::SCHEMA_VERSION,
            )),
            Self::Interval | Self::Scenario => None,
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::Run => "A qbench run report (`qbench --json`).",
            Self::Merge => "A run report made by `qbench merge` from shards' reports.",
            Self::Compare => "A qbench compare report (`qbench compare --json`).",
            Self::Compete => "A qbench compete report (`qbench compete --json`).",
            Self::SweepCell => "One cell of a qbench sweep (`qbench sweep --out DIR`).",
            Self::Cost => "The cost model and measured transfers (`qbench cost --json`).",
            Self::Diff => "Two run reports compared (`qbench diff --format json`).",
            Self::Interval => "One line of `--json-stream`: an interval of run `run`.",
            Self::Scenario => "A qbench sweep scenario file (TOML), as the data it parses to.",
        }
    }
}

/// The schema of `kind`, as `qbench schema KIND` prints it and `docs/schema/` holds it.
pub fn schema(kind: SchemaKind) -> Value {
    let mut gen = SchemaSettings::draft2020_12()
        .with_transform(CloseObjects)
        .into_generator();
    let root = match kind {
        SchemaKind::Run | SchemaKind::Merge => gen.root_schema_for::<crate::Report>(),
        SchemaKind::Compare => gen.root_schema_for::<crate::report::compare::CompareReport>(),
        SchemaKind::Compete => gen.root_schema_for::<crate::report::compete::CompeteReport>(),
        SchemaKind::SweepCell => gen.root_schema_for::<crate::scenario::cell::CellFile>(),
        SchemaKind::Cost => gen.root_schema_for::<crate::stats::cost::CostReport>(),
        SchemaKind::Diff => gen.root_schema_for::<crate::report::diff::DiffReport>(),
        SchemaKind::Interval => gen.root_schema_for::<crate::report::load::IntervalLine<'_>>(),
        SchemaKind::Scenario => gen.root_schema_for::<crate::scenario::Scenario>(),
    };
    let mut v = root.to_value();
    inline_tagged_variants(&mut v);
    v["title"] = json!(format!("qbench {}", kind.name()));
    v["description"] = json!(kind.description());
    let mut v = header_first(v);
    if let Some((tag, version)) = kind.tag() {
        pin(&mut v, &[], tag, version);
        // Reports nested in others (a compare report's two sides, a compete report's flows)
        // carry their own tags.
        for (def, (tag, version)) in [
            (
                "Report",
                (crate::report::SCHEMA, crate::report::SCHEMA_VERSION),
            ),
            (
                "CompareReport",
                (
                    crate::report::compare::SCHEMA,
                    crate::report::compare::SCHEMA_VERSION,
                ),
            ),
            (
                "CompeteReport",
                (
                    crate::report::compete::SCHEMA,
                    crate::report::compete::SCHEMA_VERSION,
                ),
            ),
        ] {
            pin(&mut v, &["$defs", def], tag, version);
        }
    }
    if kind == SchemaKind::Merge {
        if let Some(Value::Array(req)) = v.get_mut("required") {
            req.push(json!("merged"));
        }
        if let Some(m) = v.pointer_mut("/properties/merged") {
            // Present and not null: that is what tells a merged report from a shard's.
            *m = json!({"$ref": "#/$defs/MergeInfo"});
        }
    }
    v
}

/// Every schema, in `SchemaKind::ALL` order, as the text `docs/schema/` holds.
pub fn all_files() -> Vec<(String, String)> {
    SchemaKind::ALL
        .iter()
        .map(|&k| (k.file_name(), pretty(&schema(k))))
        .collect()
}

/// Two-space indented JSON with a final newline.
pub fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a JSON value always serializes");
    s.push('\n');
    s
}

/// An internally tagged enum's variant is `{"$ref": T, "properties": {"kind": ...}}`, and T,
/// being closed, would refuse the `kind` beside its own fields: such a variant gets a copy of
/// T with `kind` added. Definitions no longer referenced are then dropped.
fn inline_tagged_variants(root: &mut Value) {
    let defs = root.get("$defs").cloned().unwrap_or(Value::Null);
    fn walk(v: &mut Value, defs: &Value) {
        match v {
            Value::Object(obj) => {
                let target = obj
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .filter(|_| obj.contains_key("properties"))
                    .and_then(|name| defs.get(name))
                    .and_then(Value::as_object);
                if let Some(def) = target.cloned() {
                    obj.remove("$ref");
                    for key in ["properties", "required"] {
                        let merged = match (def.get(key).cloned(), obj.remove(key)) {
                            (Some(Value::Object(mut m)), Some(Value::Object(o))) => {
                                m.extend(o);
                                Some(Value::Object(m))
                            }
                            (Some(Value::Array(mut m)), Some(Value::Array(o))) => {
                                m.extend(o);
                                Some(Value::Array(m))
                            }
                            (theirs, ours) => ours.or(theirs),
                        };
                        if let Some(m) = merged {
                            obj.insert(key.into(), m);
                        }
                    }
                    for (k, x) in def {
                        obj.entry(k).or_insert(x);
                    }
                }
                obj.values_mut().for_each(|x| walk(x, defs));
            }
            Value::Array(items) => items.iter_mut().for_each(|x| walk(x, defs)),
            _ => {}
        }
    }
    walk(root, &defs);
    // Drop definitions nothing refers to any more (repeat: one may hold the last reference
    // to another).
    loop {
        let text = root.to_string();
        let Some(Value::Object(defs)) = root.get_mut("$defs") else {
            return;
        };
        let unused: Vec<String> = defs
            .keys()
            .filter(|name| !text.contains(&format!("\"#/$defs/{name}\"")))
            .cloned()
            .collect();
        if unused.is_empty() {
            return;
        }
        for name in unused {
            defs.remove(&name);
        }
    }
}

/// `$schema`, `title` and `description` at the top, where a reader looks.
fn header_first(v: Value) -> Value {
    let Value::Object(mut rest) = v else {
        return v;
    };
    let mut out = serde_json::Map::new();
    for key in ["$schema", "title", "description"] {
        if let Some(x) = rest.remove(key) {
            out.insert(key.into(), x);
        }
    }
    out.extend(rest);
    Value::Object(out)
}

/// Fixes the `schema` and `schema_version` properties of the object at `at` to constants.
fn pin(v: &mut Value, at: &[&str], tag: &str, version: u32) {
    let mut obj = &mut *v;
    for key in at {
        match obj.get_mut(*key) {
            Some(o) => obj = o,
            None => return,
        }
    }
    if let Some(p) = obj.pointer_mut("/properties/schema") {
        p["const"] = json!(tag);
    }
    if let Some(p) = obj.pointer_mut("/properties/schema_version") {
        p["const"] = json!(version);
    }
}

/// Sets `additionalProperties: false` on every object schema that lists its properties and
/// says nothing of others.
#[derive(Debug, Clone, Copy)]
struct CloseObjects;

impl Transform for CloseObjects {
    fn transform(&mut self, schema: &mut Schema) {
        transform_subschemas(self, schema);
        if let Some(obj) = schema.as_object_mut() {
            if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
                obj.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
    }
}

/// The schema of a type alone, for tests.
#[cfg(test)]
pub(crate) fn of<T: schemars::JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .with_transform(CloseObjects)
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_pins_its_tag_and_version() {
        for kind in SchemaKind::ALL {
            let v = schema(kind);
            assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
            if let Some((tag, version)) = kind.tag() {
                assert_eq!(v["properties"]["schema"]["const"], tag, "{kind:?}");
                assert_eq!(
                    v["properties"]["schema_version"]["const"], version,
                    "{kind:?}"
                );
            }
        }
    }

    #[test]
    fn a_merge_report_requires_merged_and_a_run_report_does_not() {
        let req = |k| schema(k)["required"].as_array().unwrap().clone();
        assert!(req(SchemaKind::Merge).contains(&json!("merged")));
        assert!(!req(SchemaKind::Run).contains(&json!("merged")));
    }

    #[test]
    fn objects_are_closed() {
        let v = of::<crate::report::ToolInfo>();
        assert_eq!(v["additionalProperties"], false);
    }
}
