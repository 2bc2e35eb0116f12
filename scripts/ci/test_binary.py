#!/usr/bin/env python3
"""The path of one test executable from a `cargo test --no-run --message-format=json` build.

    python3 scripts/ci/test_binary.py BUILD.json PACKAGE TARGET

Prints the executable of PACKAGE's test target TARGET (e.g. `qbench it`); exits 1 when the
build has none.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_failures import artifacts  # noqa: E402


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, package, target = sys.argv[1:]
    try:
        built = list(artifacts(path))
    except OSError as e:
        print(f"test_binary: cannot read {path}: {e}", file=sys.stderr)
        return 1
    for m in built:
        t = m.get("target", {})
        # package_id: "path+file:///.../crates/client#qbench@0.1.0", "path+file:///.../qbench#0.1.0"
        # when the folder has the package's name, or "qbench 0.1.0 (path+file://...)" before.
        pid = m.get("package_id", "")
        if "#" in pid:
            url, frag = pid.split("#", 1)
            name = frag.split("@")[0] if "@" in frag else url.rstrip("/").split("/")[-1]
        else:
            name = pid.split(" ")[0]
        if name == package and t.get("name") == target and "test" in t.get("kind", []):
            print(m["executable"])
            return 0
    print(f"test_binary: {path} has no test target {target} of {package}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
