#!/usr/bin/env python3
"""Time cnnbench and PyTorch on the same problems, interleaved, and compare.

Usage: python3 scripts/peers/side_by_side.py --out DIR [--from builtin:resnet50|FILE]
           [--rounds 2] [--cnnbench target/release/cnnbench] [--python .venv/bin/python]
           [-- extra cnnbench conv options]

On a shared machine the speed available drifts from minute to minute, so
timing one tool over a whole list and then the other confounds the tools
with the drift. This driver alternates them problem by problem, in ABBA
order across rounds (round 1: cnnbench then PyTorch, round 2: PyTorch then
cnnbench, ...), and keeps for each tool its best median per problem and
direction over the rounds. Both tools are treated alike.

Writes DIR/cnnbench.csv and DIR/pytorch.csv (best rows, cnnbench's CSV
contract), DIR/*_all.csv (every round) and DIR/compare.md (from compare.py,
with % of peak against the best FMA peak cnnbench measured in any round).
"""
import argparse
import csv
import io
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PEER_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "1099511627776"}


def problems(source):
    if source.startswith("builtin:"):
        source = os.path.join(ROOT, "src", "problem", "lists", source[len("builtin:"):] + ".txt")
    out = []
    for line in open(source):
        line = line.split("#")[0].strip()
        if line:
            out.append(line)
    return out


def run_csv(cmd, env=None):
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if res.returncode != 0:
        sys.exit(f"side_by_side.py: error: {' '.join(cmd)} failed: {res.stderr.strip()}")
    return list(csv.DictReader(io.StringIO(res.stdout)))


def main(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--from", dest="source", default="builtin:resnet50")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cnnbench", default=os.path.join(ROOT, "target", "release", "cnnbench"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    ours_cmd = lambda d: [a.cnnbench, "conv", d, "--format", "csv", "--quiet"] + extra
    peer_cmd = lambda d: [a.python, os.path.join(HERE, "pytorch_conv.py"), d]
    rows = {"cnnbench": [], "pytorch": []}
    descs = problems(a.source)
    for rnd in range(a.rounds):
        for i, d in enumerate(descs):
            order = ["cnnbench", "pytorch"] if rnd % 2 == 0 else ["pytorch", "cnnbench"]
            for tool in order:
                got = run_csv(ours_cmd(d)) if tool == "cnnbench" else run_csv(peer_cmd(d), PEER_ENV)
                for r in got:
                    r["round"] = str(rnd)
                rows[tool] += got
            sys.stderr.write(f"\rround {rnd + 1}/{a.rounds}: {i + 1}/{len(descs)} problems")
    sys.stderr.write("\n")
    for tool, rs in rows.items():
        fields = list(rs[0].keys())
        with open(os.path.join(a.out, f"{tool}_all.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            w.writeheader()
            w.writerows(rs)
        best = {}
        for r in rs:
            k = (r["problem"], r["dir"])
            if k not in best or float(r["ms_median"]) < float(best[k]["ms_median"]):
                best[k] = r
        with open(os.path.join(a.out, f"{tool}.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[x for x in fields if x != "round"], lineterminator="\n",
                               extrasaction="ignore")
            w.writeheader()
            w.writerows(best.values())
    peak = max(float(r["gflops"]) / float(r["peak_fraction"]) for r in rows["cnnbench"] if r["peak_fraction"])
    md = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), os.path.join(a.out, "cnnbench.csv"),
                         os.path.join(a.out, "pytorch.csv"), "--peak-gflops", repr(peak)],
                        capture_output=True, text=True, check=True).stdout
    md = f"FP32 peak (best FMA-loop measurement of any cnnbench round): {peak:.1f} GFLOP/s\n\n" + md
    open(os.path.join(a.out, "compare.md"), "w").write(md)
    print(md)


if __name__ == "__main__":
    main(sys.argv[1:])
