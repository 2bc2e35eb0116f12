#!/usr/bin/env python3
"""Runs every test executable a `cargo test --no-run --message-format=json` build listed, one
after another in its crate's directory, as `cargo test` would, but without cargo: two suites
can then run at once from one build, neither waiting on cargo's lock on the target directory.

    python3 scripts/ci/run_suite.py BUILD.json LOG [TEST_ARGS...]

TEST_ARGS go to every executable (a filter, `--test-threads N`). The whole output goes to LOG,
one line per executable to stdout. Exits 1 if any executable failed.
"""
import json
import os
import subprocess
import sys


def executables(path):
    seen = set()
    for line in open(path, encoding="utf-8", errors="replace"):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        exe = m.get("executable") if m.get("reason") == "compiler-artifact" else None
        if exe and m.get("profile", {}).get("test") and exe not in seen:
            seen.add(exe)
            yield exe, os.path.dirname(m["manifest_path"])


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build, log, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    failed = []
    ran = 0
    with open(log, "w", encoding="utf-8") as out:
        for exe, crate in executables(build):
            ran += 1
            out.write(f"\n     Running {os.path.relpath(crate)} ({exe})\n")
            out.flush()
            rc = subprocess.call([exe, *args], cwd=crate, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
            name = os.path.basename(exe)
            print(f"{name}: {'ok' if rc == 0 else f'FAILED (status {rc})'}", flush=True)
            if rc != 0:
                out.write(f"error: test failed, to rerun pass `{exe}`\n")
                failed.append(name)
    if ran == 0:
        print(f"{build} lists no test executable", file=sys.stderr)
        return 1
    print(f"{ran - len(failed)}/{ran} test executables passed; log: {log}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
