#!/usr/bin/env python3
"""Lists the tests that failed in a `cargo test --no-fail-fast` log, each with two commands
that rerun it alone without building anything: the test binary itself (from the build's
`--message-format=json` list of executables) in its crate's directory, as cargo runs it, and
cargo over the whole workspace filtered to that test. Under each, the first lines of what the
test printed when it failed (its panic message): the summary is the part of a long log that a
reader, or a CI page showing only the tail, is sure to see.

    python3 scripts/ci/test_failures.py BUILD.json TESTS.log

Exits 1 when a test (or a whole test binary) failed, 0 when none did.
"""
import json
import os
import re
import shlex
import sys

# Read by the tests at run time; none of them is an input of the build.
ENV = ("CI", "QBENCH_REQUIRE_EDT", "QBENCH_TEST_WITHOUT")
# An input of the build: scripts/test.sh compiles the workspace with clippy's driver, and cargo
# without it would compile the workspace's crates again.
BUILD_ENV = ("RUSTC_WORKSPACE_WRAPPER",)


def artifacts(path):
    """Each executable the build's JSON messages name (raises OSError when unreadable)."""
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    for line in lines:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable"):
            yield m


def executables(path):
    """basename of each test executable -> (crate dir, cargo's target selector)."""
    found = {}
    try:
        built = list(artifacts(path))
    except OSError:
        return found
    for m in built:
        t = m["target"]
        kind = t["kind"][0] if t.get("kind") else ""
        if kind == "lib" or kind.endswith("lib"):
            sel = ["--lib"]
        elif kind in ("bin", "test", "bench", "example"):
            sel = ["--" + kind, t["name"]]
        else:
            continue
        crate = os.path.dirname(m["manifest_path"])
        found[os.path.basename(m["executable"])] = (m["executable"], crate, sel)
    return found


# Lines of a failed test's output kept in the summary; the whole of it is in the log above.
SHOWN = 12


def printed(text):
    """test name -> the lines libtest printed under `---- NAME stdout ----` (its panic)."""
    out = {}
    head = re.compile(r"^---- (.+?) stdout ----\s*$")
    name = None
    for line in text:
        if m := head.match(line):
            name = m.group(1)
            out[name] = []
        elif name is not None:
            if line.startswith("failures:") or line.startswith("test result:"):
                name = None
            else:
                out[name].append(line)
    return {k: [x for x in without_backtrace(v) if x.strip()] for k, v in out.items()}


def without_backtrace(lines):
    """The lines before a `stack backtrace:` and from its `note:` on: the frames are in the log."""
    skipping = False
    for line in lines:
        if line.startswith("stack backtrace:"):
            skipping = True
        elif skipping and line.startswith("note:"):
            skipping = False
        if not skipping:
            yield line


def failures(path):
    """([(binary path or doc-test crate, test name or None for the whole binary)], printed)"""
    out = []
    current = None
    listed = set()
    running = re.compile(r"^\s*Running .* \((.+)\)\s*$")
    doc = re.compile(r"^\s*Doc-tests (\S+)")
    failed = re.compile(r"^test (.+?) \.\.\. FAILED\s*$")
    whole = re.compile(r"^error: test failed, to rerun pass `(.+)`")
    try:
        text = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return [("(no test log)", None)], {}
    for line in text:
        if m := running.match(line):
            current = m.group(1)
        elif m := doc.match(line):
            current = "doc:" + m.group(1)
        elif (m := failed.match(line)) and current:
            # A doc test's name carries its file and line: `src/lib.rs - f (line 3)`.
            out.append((current, m.group(1)))
            listed.add(current)
        elif (m := whole.match(line)) and current and current not in listed:
            # Crashed or killed before it listed its failures.
            out.append((current, None))
            listed.add(current)
    return out, printed(text)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    exes = executables(sys.argv[1])
    failed, said = failures(sys.argv[2])
    if not failed:
        print("\nno test failed")
        return 0
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ENV if k in os.environ)
    env = env + " " if env else ""
    build_env = "".join(f"{k}={shlex.quote(os.environ[k])} " for k in BUILD_ENV if k in os.environ)
    print(f"\nfailed tests ({len(failed)}):")
    root = os.getcwd()
    for binary, name in failed:
        if binary.startswith("doc:"):
            crate = binary[4:]
            print(f"  doc test of {crate}: {name}")
            package = crate.replace("_", "-")
            only = shlex.quote(name.split(" - ")[-1])
            print(f"    rerun: {env}{build_env}cargo test -p {package} --doc -- {only}")
            continue
        hit = exes.get(os.path.basename(binary))
        label = name if name else "(the whole binary failed: crashed, killed or timed out)"
        print(f"  {os.path.basename(binary)}: {label}")
        args = [shlex.quote(name), "--exact"] if name else []
        if hit:
            exe, crate, sel = hit
            rel = os.path.relpath(crate, root)
            print(f"    rerun: (cd {shlex.quote(rel)} && {env}{shlex.quote(exe)} {' '.join(args)})")
            # The whole workspace, as the stage built it: one package alone can unify its
            # dependencies' features differently and rebuild them.
            if args:
                print(f"       or: {env}{build_env}cargo test --workspace --locked --lib --bins --tests -- {' '.join(args)}")
            else:
                print(f"       or: {env}{build_env}cargo test --workspace --locked {' '.join(sel)} (in {rel})")
        else:
            print(f"    rerun: {env}{shlex.quote(binary)} {' '.join(args)}")
        lines = said.get(name, []) if name else []
        for line in lines[:SHOWN]:
            print(f"    | {line[:300]}")
        if len(lines) > SHOWN:
            print(f"    | ... {len(lines) - SHOWN} more lines in the log")
    return 1


if __name__ == "__main__":
    sys.exit(main())
