#!/usr/bin/env python3
"""Runs the same commands with two cnnbench binaries and says whether their
outputs agree apart from what a rerun changes (times, rates, timestamps,
the git commit, the command line).

usage: scripts/dev/same_output.py OLD_BIN NEW_BIN [--quick] [--keep DIR]

Each command runs in table, JSON and CSV form, old then new. Decimal
numbers are masked (times and rates are decimals; counts, shapes and sizes
are integers and must match), as are `timestamp`, `git` and `command`, a
model's workspace and total memory (they follow the algorithms its timed
search picked; conv runs name an algorithm for the same reason), and runs
of spaces (a table's widths follow its numbers). Exit status 1 when
any output, exit status or stderr differs. For refactors: the issue that
asks for one names the commands below."""
import argparse
import difflib
import os
import re
import subprocess
import sys

COMMANDS = [
    ["conv", "--from", "builtin:resnet50", "--iters", "2", "--device", "cpu", "--algo", "direct"],
    ["conv", "--from", "builtin:resnet50", "--iters", "2", "--device", "cpu", "--algo", "im2col_gemm"],
    ["model", "resnet50", "--batch", "2", "--iters", "2", "--device", "cpu"],
    ["rnn", "l1t25mb16sic128", "l2t10mb4sic64", "--cell", "lstm", "--iters", "2", "--device", "cpu"],
    ["rnn", "l1t25mb16sic128", "--cell", "gru", "--iters", "2", "--device", "cpu"],
]
QUICK = [
    ["conv", "--from", "builtin:resnet50", "--iters", "1", "--dir", "fwd", "--device", "cpu", "--algo", "direct"],
    ["model", "resnet18", "--batch", "2", "--iters", "1", "--device", "cpu"],
    ["rnn", "l1t10mb4sic64", "--cell", "lstm", "--iters", "1", "--device", "cpu"],
]
FORMATS = ["table", "json", "csv"]


def mask(text, binary):
    text = text.replace(binary, "BIN")
    text = re.sub(r'"(timestamp|git|command)": "[^"]*"', r'"\1": "X"', text)
    # the model's workspace follows the algorithms its auto search picked
    text = re.sub(r'"(workspace|total)": \d+', r'"\1": N', text)
    text = re.sub(r"\(git [0-9a-f]+[^)]*\)|\([0-9a-f]{12}(-dirty)?\)", "(GIT)", text)
    text = re.sub(r"-?\d+\.\d+(e[-+]?\d+)?", "D", text)
    text = re.sub(r"peak \d+ GFLOP/s", "peak D GFLOP/s", text)
    text = re.sub(r"\bD(\s*\(D-D\))", r"D\1", text)
    text = re.sub(r"[ \t]+", " ", text)
    return text


def run(binary, args, fmt):
    cmd = [binary] + args + ([] if fmt == "table" else ["--format", fmt])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    return p.returncode, mask(p.stdout, binary), mask(p.stderr, binary)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--quick", action="store_true", help="smaller problems (a minute in all)")
    ap.add_argument("--keep", help="write each masked output to this folder")
    a = ap.parse_args()
    old, new = os.path.abspath(a.old), os.path.abspath(a.new)
    differ = 0
    for args in QUICK if a.quick else COMMANDS:
        for fmt in FORMATS:
            outs = [run(b, args, fmt) for b in (old, new)]
            label = " ".join(args) + f" [{fmt}]"
            if outs[0] == outs[1]:
                print(f"same    {label} (exit {outs[0][0]})")
            else:
                differ += 1
                print(f"DIFFER  {label}")
                for name, i in (("exit", 0), ("stdout", 1), ("stderr", 2)):
                    if outs[0][i] != outs[1][i]:
                        lines = difflib.unified_diff(str(outs[0][i]).splitlines(), str(outs[1][i]).splitlines(),
                                                     "old " + name, "new " + name, lineterm="", n=1)
                        print("\n".join(list(lines)[:40]))
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                stem = re.sub(r"[^A-Za-z0-9]+", "_", label)
                for who, o in zip(("old", "new"), outs):
                    open(os.path.join(a.keep, f"{stem}.{who}"), "w").write(f"exit {o[0]}\n{o[1]}\n--- stderr\n{o[2]}")
    print(f"{differ} of {len(FORMATS) * len(QUICK if a.quick else COMMANDS)} outputs differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
