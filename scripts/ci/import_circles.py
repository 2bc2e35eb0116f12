#!/usr/bin/env python3
"""Import circles inside each crate: every file's `crate::`, `super::` and `self::` paths
(comments and unit tests left out) resolved to the module files they name, and the strongly
connected components of that graph. A circle means a type sits in the wrong file. Prints the
circles of each crate and exits 1 when any crate has one; the test command runs it.

    python3 scripts/ci/import_circles.py            # every crate
    python3 scripts/ci/import_circles.py DIR...     # crates' src directories
"""

import os
import re
import sys
from collections import defaultdict
def is_test(rel):
    # Unit tests (`tests.rs`, `*_tests.rs` and what sits under a `tests/` folder) may import
    # anything of the module they test.
    parts = rel.split(os.sep)
    return parts[-1] == 'tests.rs' or parts[-1].endswith('_tests.rs') or 'tests' in parts[:-1]
def modules(src):
    mods = {}
    for dp, _, fs in os.walk(src):
        for f in fs:
            p = os.path.join(dp, f)
            if not f.endswith('.rs') or is_test(os.path.relpath(p, src)): continue
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ('mod', 'lib', 'main'): rel = rel[:-1]
            mods['::'.join(rel)] = p
    return mods
def graph(src):
    mods = modules(src)
    g = defaultdict(set)
    for m, p in mods.items():
        text = open(p).read()
        text = re.split(r'#\[cfg\(test\)\]\s*mod tests', text)[0]
        text = re.sub(r'//.*', '', text)
        parent = '::'.join(m.split('::')[:-1])
        refs = re.findall(r'\bcrate::([a-z_0-9]+(?:::[a-z_0-9]+)*)', text)
        refs += [ (parent + '::' + r if parent else r) for r in re.findall(r'\bsuper::([a-z_0-9]+(?:::[a-z_0-9]+)*)', text)]
        refs += [ (m + '::' + r if m else r) for r in re.findall(r'\bself::([a-z_0-9]+(?:::[a-z_0-9]+)*)', text)]
        for r in refs:
            parts = r.split('::')
            for k in range(len(parts), 0, -1):
                cand = '::'.join(parts[:k])
                if cand in mods:
                    if cand != m and not m.startswith(cand + '::') and cand != '':
                        g[m].add(cand)
                    break
    return mods, g
def sccs(nodes, g):
    index, low, st, on, out, i = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v] = low[v] = i[0]; i[0] += 1; st.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                strong(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in nodes:
        if v not in index: strong(v)
    return out
def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
    crates = sys.argv[1:] or [os.path.join(root, "crates", c, "src") for c in ("core", "stack", "server", "shaper", "engine", "client", "testkit")]
    found = 0
    for crate in crates:
        mods, g = graph(crate)
        cs = sccs(sorted(mods), g)
        found += len(cs)
        print(os.path.relpath(crate, root), len(cs), "circles")
        for c in cs:
            print("  ", " ".join(c))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
