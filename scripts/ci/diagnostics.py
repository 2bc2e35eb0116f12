#!/usr/bin/env python3
"""The compiler's messages from a `cargo ... --message-format=json` build, which compiled the
workspace's own crates with clippy's driver (RUSTC_WORKSPACE_WRAPPER): one build gives the test
binaries and the lints.

    cargo test --no-run --message-format=json | python3 scripts/ci/diagnostics.py --live OUT.json
        copies the JSON to OUT.json and prints each message as rustc renders it, as it comes
    python3 scripts/ci/diagnostics.py --judge OUT.json
        lists the warnings and errors of the workspace's crates; exits 1 when there is one

Dependencies are built with `--cap-lints allow`: every message is the workspace's.
"""
import json
import sys


def messages(lines):
    for line in lines:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-message":
            yield m
        elif m.get("reason") == "build-finished" and not m.get("success", True):
            yield {"build_failed": True}


def live(out_path):
    with open(out_path, "w", encoding="utf-8") as out:
        for line in sys.stdin:
            out.write(line)
            out.flush()
            for m in messages([line]):
                rendered = m.get("message", {}).get("rendered")
                if rendered:
                    sys.stderr.write(rendered)
    return 0


def judge(path):
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        print(f"diagnostics: cannot read {path}: {e}", file=sys.stderr)
        return 1
    seen = set()
    found = []
    failed = False
    for m in messages(lines):
        if m.get("build_failed"):
            failed = True
            continue
        msg = m.get("message", {})
        if msg.get("level") not in ("warning", "error"):
            continue
        # The summary line ("N warnings emitted") has no span.
        if not msg.get("spans"):
            continue
        span = msg["spans"][0]
        key = (msg.get("message"), span.get("file_name"), span.get("line_start"))
        if key in seen:
            # A lib and its test target report the same line twice.
            continue
        seen.add(key)
        found.append(f"{span.get('file_name')}:{span.get('line_start')}: {msg['level']}: {msg.get('message')}")
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} lint or compile messages in the workspace's crates (clippy's lints are errors here)")
        return 1
    if failed:
        print("the build failed without a message of the workspace's")
        return 1
    print("no lint or compile message in the workspace's crates")
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--live":
        return live(sys.argv[2])
    if len(sys.argv) == 3 and sys.argv[1] == "--judge":
        return judge(sys.argv[2])
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
