//! The scenario schema's typed fields and the knob table name the same settings: a knob given
//! a scenario field or axis without the field, or a field added without its knob or its
//! lowering by hand, fails here.

use std::collections::BTreeSet;

use super::{Axes, Base, Scenario, SideBase, AXES};
use crate::spec::knobs::{side_knobs, KNOBS};

/// `[base]` fields lowered by hand, not through the knob table: what the cell is (protocols,
/// flows, objects, page), how it is judged, the link and its load, and the settings whose
/// scenario form differs from the flag's (`quic` is laid over key by key, `timeout` takes
/// us, ms or s).
const BASE_BY_HAND: &[&str] = &[
    "protos",
    "flows",
    "proto",
    "objects",
    "rounds",
    "min_rounds",
    "max_rounds",
    "precision",
    "test",
    "metric",
    "link",
    "link_b",
    "quic",
    "timeout",
    "duration",
    "warmup",
    "request_rate",
    "arrivals",
    "max_inflight",
    "a",
    "b",
    "page",
];

fn properties<T: schemars::JsonSchema>() -> BTreeSet<String> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    schema["properties"]
        .as_object()
        .expect("a table has properties")
        .keys()
        .cloned()
        .collect()
}

fn set<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    names.into_iter().map(str::to_string).collect()
}

#[test]
fn the_scenario_tables_name_the_knobs_fields_both_ways() {
    let base = set(KNOBS
        .iter()
        .filter_map(|k| k.base)
        .chain(BASE_BY_HAND.iter().copied()));
    assert_eq!(properties::<Base>(), base);
    let sides = set(side_knobs()
        .filter(|(_, s)| s.in_file)
        .filter_map(|(k, _)| k.base));
    assert_eq!(properties::<SideBase>(), sides);
    assert_eq!(properties::<Axes>(), set(AXES.iter().copied()));
    assert_eq!(
        AXES.len(),
        set(AXES.iter().copied()).len(),
        "an axis named twice"
    );
    let knob_axes = KNOBS
        .iter()
        .filter_map(|k| k.axis)
        .chain(side_knobs().filter_map(|(_, s)| s.b_axis));
    for axis in knob_axes {
        assert!(
            AXES.contains(&axis),
            "the knobs' axis `{axis}` is not in Axes"
        );
    }
}

fn error(toml: &str) -> String {
    let s = Scenario::parse(&format!("name = \"x\"\n{toml}\n")).unwrap();
    s.cells().unwrap_err().to_string()
}

/// A scenario value is held to the range its flag is: a base or side value outside it once
/// reached the run unchecked.
#[test]
fn base_and_side_values_keep_their_flags_bounds() {
    for (toml, want) in [
        ("[base]\nstreams = 0", "base.streams: 1 or more streams"),
        ("[base]\ncwnd_cap = 0", "base.cwnd_cap: 1 or more packets"),
        (
            "[base.a]\nconnections = 0",
            "base.a.connections: 1 to 25000 connections",
        ),
        (
            "[base.b]\ncwnd_cap = 0",
            "base.b.cwnd_cap: 1 or more packets",
        ),
        ("[axes]\nb_cwnd_cap = [0]", "b_cwnd_cap: 1 or more packets"),
    ] {
        let err = error(&format!("[base]\n{toml}").replace("[base]\n[base]", "[base]"));
        assert!(err.contains(want), "{toml}: {err}");
    }
}
