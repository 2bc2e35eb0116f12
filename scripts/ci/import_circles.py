#!/usr/bin/env python3
"""Import circles inside each crate, at two levels. File level: every file's `crate::`,
`super::` and `self::` paths (brace groups such as `crate::{a::X, b}` expanded, names the
crate root re-exports followed; comments and unit tests left out) resolved to the module
files they name, and the strongly connected components of that graph. Folder level: the same
graph with each module collapsed to its top module (`plan::config` -> `plan`, `observe.rs` ->
`observe`), so that a crate's folders form layers too. A circle means a type sits in the
wrong file or folder. Prints each crate's circles and exits 1 when any crate has one, except
a folder-level circle of a crate in ALLOWED, which is printed as a warning; the test command
runs it.

    python3 scripts/ci/import_circles.py              # every crate
    python3 scripts/ci/import_circles.py DIR...       # crates' src directories
    python3 scripts/ci/import_circles.py --self-test  # the check on made-up crates
"""

import os
import re
import sys
import tempfile
from collections import defaultdict

# Crates whose folders still import each other in a circle while the fix is under way (issue
# #60). A crate is named here only with its reason, and an entry whose crate has no circle
# any more fails the check, so the list cannot outlive the circles it excuses.
# Crates whose folder circle is known, with the reason it is still there (none now).
ALLOWED: dict = {}

IDENT = r'[A-Za-z_][A-Za-z_0-9]*'
# A path starting at `crate`, `self` or `super` (not the `super` in the middle of
# `super::super::x`), up to a brace group if one follows.
PATH = re.compile(r'(?<!::)\b(crate|self|super)((?:::%s)*)(::\{)?' % IDENT)


def is_test(rel):
    # Unit tests (`tests.rs`, `*_tests.rs` and what sits under a `tests/` folder) may import
    # anything of the module they test.
    parts = rel.split(os.sep)
    return parts[-1] == 'tests.rs' or parts[-1].endswith('_tests.rs') or 'tests' in parts[:-1]


def modules(src):
    """Module path (`plan::config`, '' for lib.rs/main.rs) -> its file."""
    mods = {}
    for dp, _, fs in os.walk(src):
        for f in fs:
            p = os.path.join(dp, f)
            if not f.endswith('.rs') or is_test(os.path.relpath(p, src)):
                continue
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ('mod', 'lib', 'main'):
                rel = rel[:-1]
            mods['::'.join(rel)] = p
    return mods


def split_top(body):
    """Split a brace group's inside at the commas that are not inside a nested group."""
    parts, depth, cur = [], 0, ''
    for ch in body:
        depth += {'{': 1, '}': -1}.get(ch, 0)
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    return parts + [cur]


def expand(tree):
    """A use tree `a::{b::C, d::{e, f as g}}` as the flat paths it names (`a::b::C`, `a::d::e`,
    `a::d::f as g`). Without this only the part before the first brace would count, and a
    group such as `crate::{report::X, stats::Y}` would hide both of its edges."""
    tree = re.sub(r'\s+', ' ', tree).strip()
    i = tree.find('{')
    if i < 0:
        return [tree] if tree else []
    head, j = tree[:i].rstrip(':').strip(), tree.rfind('}')
    out = []
    for part in split_top(tree[i + 1:j]):
        out += [f'{head}::{p}' if head else p for p in expand(part)]
    return out


def paths(text):
    """Every `crate::`, `self::` and `super::` path in a file's text, brace groups expanded."""
    out = []
    for m in PATH.finditer(text):
        start = m.group(1) + m.group(2)
        if not m.group(3):
            out.append(start)
            continue
        i, depth = m.end() - 1, 0
        for j in range(i, len(text)):
            depth += {'{': 1, '}': -1}.get(text[j], 0)
            if depth == 0:
                break
        out += [f'{start}::{p.split(" as ")[0]}' for p in expand(text[i:j + 1])]
    return out


def root_uses(text):
    """What the crate root re-exports (`pub use report::{RunReport, ..}`): name -> the path it
    stands for. `crate::RunReport` reaches report as surely as `crate::report::RunReport`."""
    out = {}
    for m in re.finditer(r'^pub use (?:crate::|self::)?([^;]+);', text, re.M):
        for leaf in expand(m.group(1)):
            path, _, alias = leaf.partition(' as ')
            out[alias or path.split('::')[-1]] = path
    return out


def resolve(path, m, mods, reexports=None):
    """The module file a path seen in module `m` points into: its longest prefix that is a
    module, after `crate`, `self` and `super` are made absolute, and a name the root
    re-exports replaced by its path. None if it names no module."""
    segs = path.split('::')
    here = m.split('::') if m else []
    if segs[0] == 'crate':
        base = []
    elif segs[0] == 'self':
        base = here
    else:
        base = here[:-1]
    segs = segs[1:]
    while segs and segs[0] == 'super':
        base, segs = base[:-1], segs[1:]
    segs = base + [s for s in segs if s != 'self']
    if segs and segs[0] in (reexports or {}) and segs[0] not in mods:
        segs = reexports[segs[0]].split('::') + segs[1:]
    for k in range(len(segs), 0, -1):
        cand = '::'.join(segs[:k])
        if cand in mods:
            return cand
    return None


def graph(src):
    mods = modules(src)
    g = defaultdict(set)
    with open(mods[''] if '' in mods else os.devnull) as f:
        reexports = root_uses(f.read())
    for m, p in mods.items():
        with open(p) as f:
            text = f.read()
        text = re.split(r'#\[cfg\(test\)\]\s*mod tests', text)[0]
        text = re.sub(r'//.*', '', text)
        for path in paths(text):
            to = resolve(path, m, mods, reexports)
            # A module may use what its ancestors hold (`super::X` from a child file): that is
            # the folder's own surface, not an edge between files.
            if to and to != m and not m.startswith(to + '::'):
                g[m].add(to)
    return mods, g


def top(m):
    return m.split('::')[0]


def folder_graph(mods, g):
    """The file graph collapsed to top modules. The crate root (lib.rs, main.rs) is left out,
    as at file level: it declares every module, so it would close a circle with each."""
    nodes = sorted({top(m) for m in mods if m})
    fg = defaultdict(set)
    for a, bs in g.items():
        for b in bs:
            if a and b and top(a) != top(b):
                fg[top(a)].add(top(b))
    return nodes, fg


def sccs(nodes, g):
    index, low, st, on, out, i = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = i[0]
        i[0] += 1
        st.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    return out


def check(crates, root, allowed, say=print):
    """Print each crate's circles; return how many fail the check."""
    failed = 0
    for crate in crates:
        name = os.path.basename(os.path.dirname(os.path.abspath(crate)))
        mods, g = graph(crate)
        files = sccs(sorted(mods), g)
        folders = sccs(*folder_graph(mods, g))
        say(f'{os.path.relpath(crate, root)}: {len(files)} file-level circles, '
            f'{len(folders)} folder-level circles')
        for c in files:
            say('   file circle: ' + ' '.join(c))
        failed += len(files)
        for c in folders:
            if name in allowed:
                say(f'   warning: folder circle (allowed, {allowed[name]}): ' + ' '.join(c))
            else:
                say('   folder circle: ' + ' '.join(c))
                failed += 1
        if name in allowed and not folders:
            say(f'   {name} has no folder circle any more: take it out of ALLOWED')
            failed += 1
    return failed


def self_test():
    """The check on made-up crates: it must find a circle hidden in a brace group at both
    levels, follow `super::super` and the root's re-exports, pass a clean crate, and excuse
    an allowed crate's folder circle but not its file circles."""
    crates = {
        # a::x -> b (through a brace group) -> a::y: a folder circle a <-> b, no file circle.
        'folders': {
            'lib.rs': 'mod a; mod b;',
            'a/mod.rs': 'pub mod x; pub mod y;',
            'a/x.rs': 'use crate::{b::B, c::C};',
            'a/y.rs': 'pub struct Y;',
            'b.rs': 'use super::a::{self as _, y::Y}; pub struct B;',
            'c.rs': 'pub struct C;',
        },
        # p::q::r -> s via super::super, s -> p::q::r: a file circle (so a folder one too).
        'files': {
            'lib.rs': 'mod p; mod s;',
            'p/mod.rs': 'pub mod q;',
            'p/q/mod.rs': 'pub mod r;',
            'p/q/r.rs': 'use super::super::super::s::S; pub struct R;',
            's.rs': 'use crate::p::{q::{r::R}}; pub struct S;',
        },
        # b reaches a through the name the root re-exports: a file circle a <-> b.
        'reexport': {
            'lib.rs': 'mod a;\nmod b;\npub use a::{A as Renamed};',
            'a.rs': 'use crate::b::B; pub struct A;',
            'b.rs': 'pub struct B(crate::Renamed);',
        },
        # Edges down only; a use of a parent's item and a test's import are no edges.
        'clean': {
            'lib.rs': 'mod a; mod b;',
            'a/mod.rs': 'pub mod x; pub struct Top;',
            'a/x.rs': 'use super::Top; use crate::b::{B};',
            'b.rs': 'pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::x; }',
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        for crate, files in crates.items():
            for rel, text in files.items():
                p = os.path.join(tmp, crate, 'src', rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, 'w') as f:
                    f.write(text + '\n')
        src = {c: os.path.join(tmp, c, 'src') for c in crates}
        lines = []
        cases = [
            ('folders', {}, 1, 'folder circle: a b'),
            ('folders', {'folders': 'test'}, 0, 'warning: folder circle (allowed, test): a b'),
            ('files', {}, 2, 'file circle: p::q::r s'),
            ('files', {'files': 'test'}, 1, 'warning: folder circle (allowed, test): p s'),
            ('reexport', {}, 2, 'file circle: a b'),
            ('clean', {}, 0, '0 file-level circles, 0 folder-level circles'),
            ('clean', {'clean': 'test'}, 1, 'take it out of ALLOWED'),
        ]
        bad = 0
        for crate, allowed, want, line in cases:
            lines.clear()
            got = check([src[crate]], tmp, allowed, lines.append)
            if got != want or not any(line in l for l in lines):
                bad += 1
                print(f'self-test: {crate} with ALLOWED={allowed}: {got} failures, want {want} '
                      f'and a line with "{line}"; printed:\n   ' + '\n   '.join(lines))
    print(f'self-test: {len(cases) - bad} of {len(cases)} cases pass')
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ['--self-test']:
        sys.exit(self_test())
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '../..')
    crates = sys.argv[1:] or [os.path.join(root, 'crates', c, 'src') for c in
                              ('core', 'stack', 'server', 'shaper', 'engine', 'client', 'testkit')]
    sys.exit(1 if check(crates, root, ALLOWED) else 0)


if __name__ == '__main__':
    main()
