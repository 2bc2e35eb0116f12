#!/usr/bin/env python3
"""Writes docs/book/src/dev/layout.md: every source file of the crates with the first
sentence of its own module documentation. With --check, fails if the page is out of date
instead (the test command runs it so)."""

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
PAGE = os.path.join(ROOT, "docs/book/src/dev/layout.md")


def first_sentence(path):
    doc = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("//!"):
                doc.append(line[3:].strip())
            elif doc or line.strip():
                break
    text = " ".join(doc).split(". ")[0].rstrip(".")
    return text.replace("|", "\\|")


def page():
    out = ["# Layout", "",
           "Each crate's source files with the first sentence of their own documentation: what",
           "each holds. `python3 scripts/ci/book_layout.py` writes this page; the test command fails",
           "when it is out of date.", ""]
    for crate in ["core", "stack", "server", "shaper", "engine", "client", "testkit"]:
        base = os.path.join(ROOT, "crates", crate, "src")
        out += [f"## crates/{crate}", "", "| file | what it holds |", "| --- | --- |"]
        for dirpath, dirs, files in sorted(os.walk(base)):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, base).split(os.sep)
                unit_test = name == "tests.rs" or name.endswith("_tests.rs") or "tests" in rel[:-1]
                if not name.endswith(".rs") or unit_test:
                    continue
                what = first_sentence(path)
                if what:
                    out.append(f"| `{os.path.relpath(path, base)}` | {what} |")
        out.append("")
    return "\n".join(out)


def main():
    text = page()
    if "--check" in sys.argv[1:]:
        with open(PAGE, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit("docs/book/src/dev/layout.md is out of date: run python3 scripts/ci/book_layout.py")
        return
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
