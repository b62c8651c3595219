#!/usr/bin/env python3
"""Lists file-level import cycles between the modules of a Rust crate.

usage: scripts/dev/import_cycles.py CRATE_SRC_DIR [ROOT_FILE]

Each `use crate::...`, `use super::...` and `crate::a::b::` path in a file is
resolved to the longest module path that has a file; a cycle is two files
(or more) that reach each other. Module roots re-exporting their children
(`pub mod`/`pub use` in mod.rs/lib.rs) are not imports."""
import os
import re
import sys

src = sys.argv[1].rstrip("/")
root_file = sys.argv[2] if len(sys.argv) > 2 else ("lib.rs" if os.path.exists(f"{src}/lib.rs") else "main.rs")

mods = {}  # module path tuple -> file
for dirpath, _, files in os.walk(src):
    for f in files:
        if not f.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(dirpath, f), src)
        parts = rel[:-3].split(os.sep)
        if parts[-1] in ("mod",):
            parts = parts[:-1]
        if rel == root_file:
            parts = []
        mods[tuple(parts)] = rel


def resolve(path):
    for k in range(len(path), -1, -1):
        if tuple(path[:k]) in mods:
            return mods[tuple(path[:k])]
    return None


def module_of(rel):
    for k, v in mods.items():
        if v == rel:
            return list(k)
    return []


edges = {}
path_re = re.compile(r"\b(crate|super)((?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
for mod, rel in mods.items():
    text = open(os.path.join(src, rel)).read()
    # tests are not part of the module graph
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
    # comments (doc links included) are not imports
    text = re.sub(r"//[^\n]*", "", text)
    out = set()
    here = list(mod)
    is_root = os.path.basename(rel) in ("mod.rs", "lib.rs", "main.rs")
    for m in path_re.finditer(text):
        head, rest = m.group(1), [p for p in m.group(2).split("::") if p]
        if head == "crate":
            path = rest
        else:
            base = here if is_root else here[:-1]
            path = list(base)
            # `super` from a file module is its parent; from mod.rs, the parent's parent
            if is_root:
                path = path[:-1]
            else:
                path = path[:-1] if False else path
            while rest and rest[0] == "super":
                path = path[:-1]
                rest = rest[1:]
            path = path + rest
        target = resolve(path)
        if target and target != rel:
            line_start = text.rfind("\n", 0, m.start()) + 1
            line = text[line_start:text.find("\n", m.start())]
            if is_root and re.match(r"\s*pub (mod|use)", line):
                continue
            out.add(target)
    edges[rel] = out

cycles = set()
for a, outs in edges.items():
    for b in outs:
        if a in edges.get(b, ()):
            cycles.add(tuple(sorted((a, b))))
for a, b in sorted(cycles):
    print(f"{a} <-> {b}")
sys.exit(1 if cycles else 0)
