#!/usr/bin/env python3
"""Checks every relative link of the book (docs/book/src): the file it names exists and so
does the heading or `id` its #fragment names. mdbook builds a book with broken links; this
does not let one in."""

import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../docs/book/src")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path):
    found, fence = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            elif not fence and line.startswith("#"):
                found.add(slug(line.lstrip("#")))
            found.update(re.findall(r'id="([^"]+)"', line))
    return found


def main():
    bad = []
    for dirpath, _, files in os.walk(SRC):
        for name in files:
            if not name.endswith(".md"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
            for target in LINK.findall(text):
                if re.match(r"[a-z]+:", target):
                    continue
                file, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(dirpath, file)) if file else path
                where = os.path.relpath(path, SRC)
                if not os.path.isfile(dest):
                    bad.append(f"{where}: {target}: no such file")
                elif frag and frag not in anchors(dest):
                    bad.append(f"{where}: {target}: no such heading")
    for b in bad:
        print(b, file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
