//! `docs/schema/` holds exactly the schemas the types generate: changing a report type
//! without regenerating them fails here.

use std::path::PathBuf;

use qbench_core::schema::all_files;

const REGENERATE: &str = "regenerate with `cargo run -p qbench -- schema --dir docs/schema`";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema")
}

#[test]
fn committed_schemas_match_the_types() {
    for (name, text) in all_files() {
        let path = dir().join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("docs/schema/{name}: {e}; {REGENERATE}"));
        assert!(
            committed == text,
            "docs/schema/{name} differs from the types' schema; {REGENERATE}"
        );
    }
}

#[test]
fn docs_schema_holds_no_schema_of_a_kind_that_is_gone() {
    let expected: Vec<String> = all_files().into_iter().map(|(n, _)| n).collect();
    for entry in std::fs::read_dir(dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".schema.json") {
            assert!(
                expected.contains(&name),
                "docs/schema/{name} is no kind's schema; delete it or {REGENERATE}"
            );
        }
    }
}
