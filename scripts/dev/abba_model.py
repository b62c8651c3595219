#!/usr/bin/env python3
"""Two cnnbench binaries' training steps side by side, in ABBA order.

usage: scripts/dev/abba_model.py OLD_BIN NEW_BIN [--rounds N] -- MODEL_ARGS...
  e.g. scripts/dev/abba_model.py old new --rounds 3 -- model resnet50 --batch 16 --iters 10

Each round runs OLD, NEW, NEW, OLD (so a drift of the machine's speed
during a round falls on both alike), every run with `--format json`, and
takes each run's median step (`total_ms.median`, and forward and
backward). It prints every run, then per binary the median over its runs
and the ratio OLD / NEW of those medians (above 1: NEW is faster).
Standard library only."""
import argparse
import json
import statistics
import subprocess
import sys


def step(binary, args):
    out = subprocess.run([binary] + args + ["--format", "json"], capture_output=True, text=True, check=True)
    rec = json.loads(out.stdout)["records"][0]
    return {k: rec[k + "_ms"]["median"] for k in ("forward", "backward", "total")}


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv[:cut])
    args = argv[cut + 1:]
    runs = {"old": [], "new": []}
    for r in range(a.rounds):
        for who in ("old", "new", "new", "old"):
            s = step(a.old if who == "old" else a.new, args)
            runs[who].append(s)
            print(f"round {r + 1} {who}: forward {s['forward']:.1f} ms, backward {s['backward']:.1f} ms, "
                  f"step {s['total']:.1f} ms", flush=True)
    print(f"{' '.join(args)}: median of {2 * a.rounds} runs each (each run's median step)")
    for part in ("forward", "backward", "total"):
        o = statistics.median(x[part] for x in runs["old"])
        n = statistics.median(x[part] for x in runs["new"])
        print(f"  {part:8s} old {o:8.1f} ms  new {n:8.1f} ms  old/new {o / n:.3f}")


if __name__ == "__main__":
    main()
