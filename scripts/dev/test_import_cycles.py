#!/usr/bin/env python3
"""Tests of import_cycles.py on small crates written to a temporary folder.

usage: python3 scripts/dev/test_import_cycles.py   (exit 1 on a failure)"""
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("import_cycles", os.path.join(HERE, "import_cycles.py"))
ic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ic)


def cycles_of(files):
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        crate = ic.Crate(d)
        return ic.cycles(crate.edges())


CASES = [
    ("a use tree with braces and a rename",
     {"lib.rs": "mod a;\nmod b;\n",
      "a.rs": "use crate::b::{X, Y as Z};\npub struct W;\n",
      "b.rs": "use super::a::W;\npub struct X;\npub struct Y;\n"},
     [["a.rs", "b.rs"]]),
    ("a ring of three through written paths",
     {"lib.rs": "mod a;\nmod b;\nmod c;\n",
      "a.rs": "fn f() { crate::b::g(); }\n",
      "b.rs": "pub fn g() { super::c::h(); }\n",
      "c.rs": "pub fn h() -> crate::a::T { todo!() }\n"},
     [["a.rs", "b.rs", "c.rs"]]),
    ("a macro defined in another file",
     {"lib.rs": "mod a;\nmod b;\n",
      "a.rs": "macro_rules! shout { () => {} }\npub(crate) use shout;\nfn f() { crate::b::g(); }\n",
      "b.rs": "use crate::a::shout;\npub fn g() { shout!(); }\n"},
     [["a.rs", "b.rs"]]),
    ("an exported macro called by its crate path",
     {"lib.rs": "mod a;\nmod b;\n",
      "a.rs": "#[macro_export]\nmacro_rules! note { () => {} }\nfn f() { crate::b::g(); }\n",
      "b.rs": "pub fn g() { crate::note!(); }\n"},
     [["a.rs", "b.rs"]]),
    ("a macro called by name only",
     {"lib.rs": "mod a;\nmod b;\n",
      "a.rs": "macro_rules! shout { () => {} }\nfn f() { crate::b::g(); }\n",
      "b.rs": "pub fn g() { shout!(); }\n"},
     [["a.rs", "b.rs"]]),
    ("inline tests, test files and comments are not imports",
     {"lib.rs": "mod a;\nmod b;\n",
      "a.rs": "pub struct W;\n#[cfg(test)]\nmod tests {\n    use crate::b::X;\n}\n#[cfg(test)]\nmod more;\n",
      "a/more.rs": "use crate::b::X;\n",
      "b.rs": "// crate::a::nothing\n/* use crate::a::W; */\nuse super::a::W;\npub struct X;\n"},
     []),
    ("a module root naming its own children, and children using it",
     {"lib.rs": "mod p;\n",
      "p/mod.rs": "mod c;\nuse self::c::X;\npub use c::Y;\npub struct S;\nfn f() { c::g(); }\n",
      "p/c.rs": "use super::S;\npub struct X;\npub struct Y;\npub fn g() {}\n"},
     []),
    ("a child reaching a sibling that reaches it back",
     {"lib.rs": "mod p;\n",
      "p/mod.rs": "mod c;\nmod d;\n",
      "p/c.rs": "use super::d::D;\npub struct C;\n",
      "p/d.rs": "use super::c::C;\npub struct D;\n"},
     [["p/c.rs", "p/d.rs"]]),
    ("imports that point one way",
     {"main.rs": "mod a;\nmod b;\nmod c;\n",
      "a.rs": "use crate::{b::X, c::Y};\n",
      "b.rs": "use crate::c::Y;\npub struct X;\n",
      "c.rs": "pub struct Y;\nconst S: &str = \"crate::a::Z\";\n"},
     []),
]


def main():
    failed = 0
    for name, files, want in CASES:
        got = cycles_of(files)
        ok = got == want
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": got {got}, want {want}"))
    print(f"{len(CASES) - failed} of {len(CASES)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
