//! `qbench schema`: the published JSON Schemas, as docs/schema/ holds them. Real reports are
//! validated against them by scripts/ci/validate_reports.py over what every test writes.

use crate::common;

use common::qbench_plain;
use serde_json::Value;

fn committed(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

#[test]
fn prints_each_kind_as_committed() {
    let kinds = [
        "run",
        "merge",
        "compare",
        "compete",
        "sweep-cell",
        "cost",
        "diff",
        "interval",
        "scenario",
    ];
    for kind in kinds {
        let r = qbench_plain(&["schema", kind]);
        assert_eq!(r.code, Some(0), "{kind}: {}", r.stderr);
        assert_eq!(
            r.stdout,
            committed(&format!("{kind}.schema.json")),
            "{kind}"
        );
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("new/schemas");
    let r = qbench_plain(&["schema", "--dir", out.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut expected: Vec<String> = kinds.iter().map(|k| format!("{k}.schema.json")).collect();
    expected.sort();
    assert_eq!(written, expected);
    for name in written {
        assert_eq!(
            std::fs::read_to_string(out.join(&name)).unwrap(),
            committed(&name)
        );
    }
}

#[test]
fn bad_schema_requests_are_one_line_errors() {
    let unknown = qbench_plain(&["schema", "report"]);
    assert_eq!(unknown.code, Some(2));
    let first = unknown.stderr.lines().next().unwrap();
    assert!(
        first.contains("'report'") && first.contains("KIND"),
        "{first}"
    );

    let none = qbench_plain(&["schema"]);
    assert_eq!(none.code, Some(2), "{}", none.stderr);

    let both = qbench_plain(&["schema", "run", "--dir", "/tmp"]);
    assert_eq!(both.code, Some(2), "{}", both.stderr);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let r = qbench_plain(&["schema", "--dir", file.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("--dir"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}
