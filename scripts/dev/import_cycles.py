#!/usr/bin/env python3
"""Lists the file-level import cycles of the workspace's crates.

usage: scripts/dev/import_cycles.py [CRATE_SRC_DIR ...]

Without arguments it reads every crate of the workspace: kernels/src,
layers/src, data/src and the binary's src/ (src/dist/ included). Exit
status 1 when any crate has a cycle, 0 when none has.

What counts as one file importing another:
- every path of a `use` declaration, braces, `self`, `super`, `crate`,
  renames and globs expanded: `use super::{a::X, b}` names two paths;
- every `crate::`, `super::` and `self::` path written in the code;
- every macro call (`name!`) of a `macro_rules!` defined in another file
  of the same crate: the caller depends on the file that defines it;
- a path resolves to the longest module prefix that has a file, so
  `crate::a::b::Item` points at `a/b.rs` (or `a/b/mod.rs`), else `a.rs`.

What does not count:
- tests: `#[cfg(test)] mod NAME;` files (and their children) and inline
  `#[cfg(test)] mod NAME { ... }` blocks; comments;
- a module root (`lib.rs`, `main.rs`, `mod.rs`, or `a.rs` declaring
  children in `a/`) naming its own children (`mod a;`, `a::f()`,
  `use self::a::X`), or re-exporting anything (`pub use`,
  `pub(crate) use` at the top of the file): that is structure, not an
  import. Its children naming it (`super::X`) do count.

A cycle is a strongly connected set of two files or more: each reaches
every other through imports. Each is printed with its edges and the names
that tie them. Standard library only."""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_CRATES = ["kernels/src", "layers/src", "data/src", "src"]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments(text):
    """Removes // and /* */ comments, keeping string literals' contents
    (they cannot hold `use` declarations that matter) and line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:i + 4])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(text, open_brace):
    """Index just past the `}` matching the `{` at open_brace."""
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def drop_test_blocks(text):
    """Removes inline `#[cfg(test)] mod name { ... }` blocks."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
        if not m:
            return text
        end = block_end(text, m.end() - 1)
        text = text[:m.start()] + "\n" * text[m.start():end].count("\n") + text[end:]


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}, self}` -> [[a,b], [a,c,d], [a,c,e], [a]]."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    paths = []

    def walk(prefix, s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        for p in parts:
            if not p:
                continue
            brace = p.find("{")
            if brace >= 0:
                head = [x for x in p[:brace].split("::") if x]
                walk(prefix + head, p[brace + 1:p.rfind("}")])
                continue
            segs = [x for x in p.split("::") if x]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            if segs and segs[-1] == "*":
                segs = segs[:-1]
            paths.append(prefix + segs)

    walk([], tree)
    return paths


class Crate:
    def __init__(self, src):
        self.src = os.path.normpath(src)
        self.root_file = "lib.rs" if os.path.exists(os.path.join(self.src, "lib.rs")) else "main.rs"
        self.mods = {}  # module path tuple -> relative file
        self.is_root = {}  # relative file -> declares children
        self.texts = {}
        self._read(self.root_file, ())

    def _read(self, rel, mod):
        path = os.path.join(self.src, rel)
        raw = open(path, encoding="utf-8").read()
        text = strip_comments(raw)
        self.mods[mod] = rel
        self.texts[rel] = text
        # where this file's children live
        base = os.path.dirname(rel)
        stem = os.path.basename(rel)[:-3]
        child_dir = base if stem in ("mod", "lib", "main") else os.path.join(base, stem)
        declared = False
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text):
            attrs, name = m.group(1), m.group(2)
            declared = True
            if re.search(r"cfg\(test\)", attrs):
                continue  # a test module: not part of the graph
            candidates = [os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")]
            for cand in candidates:
                if os.path.exists(os.path.join(self.src, cand)):
                    self._read(os.path.normpath(cand), mod + (name,))
                    break
        self.is_root[rel] = declared or stem in ("mod", "lib", "main")
        self.texts[rel] = drop_test_blocks(text)

    def resolve(self, path):
        for k in range(len(path), -1, -1):
            if tuple(path[:k]) in self.mods:
                return self.mods[tuple(path[:k])], path[k:] or path[-1:]
        return None, None

    def absolute(self, mod, segs):
        """An absolute module path for `segs` written in module `mod`, or
        None for a path into another crate or the standard library."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return segs[1:]
        if head in ("super", "self"):
            path = list(mod)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    path = path[:-1]
                segs = segs[1:]
            return path + segs
        return None  # extern crate, std, or a name in scope

    def macros(self):
        """macro name -> files defining it."""
        defs = {}
        for rel, text in self.texts.items():
            for m in re.finditer(r"macro_rules!\s*(" + IDENT + r")", text):
                defs.setdefault(m.group(1), set()).add(rel)
        return defs

    def edges(self):
        """file -> {file: set of names}."""
        out = {}
        macro_defs = self.macros()
        module_of = {rel: mod for mod, rel in self.mods.items()}
        for mod, rel in self.mods.items():
            text = self.texts[rel]
            found = {}

            def add(target, names):
                if not target or target == rel:
                    return
                if self.is_root[rel] and module_of[target][:len(mod)] == mod:
                    return  # a module root naming its own children: structure
                found.setdefault(target, set()).update(names)

            spans = []
            for m in re.finditer(r"(?m)^([ \t]*)((?:pub(?:\([^)]*\))?\s+)?)use\s+([^;]*);", text):
                spans.append((m.start(), m.end()))
                is_reexport = bool(m.group(2).strip())
                if self.is_root[rel] and is_reexport and m.group(1) == "":
                    continue
                for p in expand_use_tree(m.group(3)):
                    path = self.absolute(mod, p)
                    if path is None:
                        continue
                    target, rest = self.resolve(path)
                    add(target, rest[-1:] if rest else [])
            # paths written in the code, outside `use` declarations
            body = list(text)
            for a, b in spans:
                body[a:b] = " " * (b - a)
            body = "".join(body)
            for m in re.finditer(r"(?<![\w$:])((?:crate|super|self)(?:::(?:super|" + IDENT + r"))+)(!?)", body):
                segs = m.group(1).split("::")
                path = self.absolute(mod, segs)
                if path is None:
                    continue
                if m.group(2):  # crate::name! : an exported macro
                    for f in macro_defs.get(segs[-1], ()):
                        add(f, [segs[-1] + "!"])
                    continue
                target, rest = self.resolve(path)
                add(target, rest[-1:] if rest else [])
            for m in re.finditer(r"(?<![\w:$])(" + IDENT + r")!\s*[\(\[\{]", body):
                name = m.group(1)
                defs = macro_defs.get(name, set())
                if rel in defs or not defs:
                    continue
                if len(defs) == 1:
                    add(next(iter(defs)), [name + "!"])
            out[rel] = found
        return out


def cycles(edges):
    """Strongly connected sets of two files or more (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(comps)


def main(argv):
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    dirs = argv or [os.path.join(ROOT, d) for d in DEFAULT_CRATES]
    total = 0
    for d in dirs:
        crate = Crate(d)
        edges = crate.edges()
        found = cycles(edges)
        label = os.path.relpath(crate.src, ROOT) if crate.src.startswith(ROOT) else crate.src
        n_edges = sum(len(v) for v in edges.values())
        if not found:
            print(f"{label}: {len(crate.mods)} files, {n_edges} imports, no cycle")
        for comp in found:
            total += 1
            print(f"{label}: cycle of {len(comp)} files: {', '.join(comp)}")
            members = set(comp)
            for a in comp:
                for b, names in sorted(edges[a].items()):
                    if b in members:
                        print(f"    {a} -> {b}: {', '.join(sorted(names))}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
