#!/usr/bin/env python3
"""Validates real qbench documents against the published schemas in docs/schema/.

usage: validate_reports.py SAMPLES_DIR [SCENARIO.toml ...]

SAMPLES_DIR holds what the integration tests wrote (QBENCH_REPORT_SAMPLES, see
crates/client/tests/it/common/mod.rs): JSON reports, told apart by their `schema` tag, and
`.ndjson` files of --json-stream lines. Every kind must appear at least once, so a test that
stops writing one cannot leave its schema unchecked. Scenario files are TOML, checked as the
data they parse to.

Each schema is checked against the 2020-12 metaschema with Python's `jsonschema`; the documents
are validated with `jsonschema_rs`, whose compiled validator takes 0.02 s where `jsonschema`
took 12 s for one report of 10,000 connections (the stage took 45-91 s of the test command).
"""

import json
import pathlib
import sys
import tomllib

import jsonschema
import jsonschema_rs

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SCHEMAS = ROOT / "docs" / "schema"

TAGS = {
    "qbench.run-report": "run",
    "qbench.compare-report": "compare",
    "qbench.compete-report": "compete",
    "qbench.sweep-cell": "sweep-cell",
    "qbench.cost-report": "cost",
    "qbench.diff-report": "diff",
}
NEEDED = ["run", "merge", "compare", "compete", "sweep-cell", "cost", "diff", "interval"]


def validator(kind):
    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    # Formats are annotations in 2020-12, as `jsonschema` treats them without a format checker.
    return jsonschema_rs.Draft202012Validator(schema, validate_formats=False)


def path_of(error):
    """The failing value's place, as `jsonschema`'s json_path wrote it: $.runs[0].objects."""
    at = "$"
    for part in error.instance_path:
        at += f"[{part}]" if isinstance(part, int) else f".{part}"
    return at


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: validate_reports.py SAMPLES_DIR [SCENARIO.toml ...]")
    samples = pathlib.Path(sys.argv[1])
    validators = {k: validator(k) for k in NEEDED + ["scenario"]}
    seen = {k: 0 for k in NEEDED}
    failures = []
    skipped = 0

    def check(kind, doc, where):
        errors = sorted(
            (path_of(e), e.message) for e in validators[kind].iter_errors(doc)
        )
        for at, message in errors[:5]:
            failures.append(f"{where} ({kind}): {at}: {message[:300]}")
        seen[kind] = seen.get(kind, 0) + 1

    for path in sorted(samples.iterdir()):
        text = path.read_text()
        if path.suffix == ".ndjson":
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    check("interval", json.loads(line), f"{path.name}:{n}")
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            skipped += 1
            continue
        kind = TAGS.get(doc.get("schema")) if isinstance(doc, dict) else None
        if kind is None:
            skipped += 1
            continue
        if kind == "run" and doc.get("merged") is not None:
            kind = "merge"
        check(kind, doc, path.name)

    for toml in sys.argv[2:]:
        with open(toml, "rb") as f:
            check("scenario", tomllib.load(f), toml)

    missing = [k for k in NEEDED if seen[k] == 0]
    counts = ", ".join(f"{k} {n}" for k, n in seen.items())
    print(f"schema check: {counts}; {skipped} other files skipped")
    if missing:
        failures.append(f"no sample of {', '.join(missing)}: no test wrote one")
    if failures:
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        sys.exit(f"schema check failed: {len(failures)} problem(s)")


if __name__ == "__main__":
    main()
