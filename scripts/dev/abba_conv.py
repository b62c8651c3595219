#!/usr/bin/env python3
"""Convolutions timed by cnnbench binaries (or environments) side by side, in rotating order.

usage: scripts/dev/abba_conv.py --prob DESC [--prob DESC ...] [--dir fwd] [--algo direct]
           [--threads 2] [--rounds 4] [--iters 10] NAME:BIN[:VAR=VALUE,...] ...
  e.g. scripts/dev/abba_conv.py --prob mb16ic64ih56oc64oh56kh3ph1 --rounds 2 old:./old new:./new

Round r runs the variants in the given order when r is even and reversed when
it is odd (ABBA for two), each run `cnnbench conv DESC --format csv -q
--no-save` with its environment additions, and keeps the run's median
(`ms_median`). Prints per problem each variant's median over the rounds and
the first variant's over it (above 1: faster than the first). --threads is
passed on the command line, so it wins over a variant's CNNBENCH_THREADS.
A run whose check failed, or that gave no time, stops the script. Standard
library only."""
import argparse
import csv
import io
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--prob", action="append", required=True)
    ap.add_argument("--dir", default="fwd")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--algo", default="direct")
    ap.add_argument("--iters", default="10")
    ap.add_argument("variants", nargs="+")
    a = ap.parse_args()
    vs = []
    for v in a.variants:
        parts = v.split(":", 2)
        if len(parts) < 2:
            sys.exit(f"abba_conv.py: a variant is NAME:BIN[:VAR=VALUE,...], not {v!r}")
        env = dict(os.environ)
        if len(parts) > 2 and parts[2]:
            for kv in parts[2].split(","):
                k, _, val = kv.partition("=")
                env[k] = val
        if any(parts[0] == n for n, _, _ in vs):
            sys.exit(f"abba_conv.py: two variants are named {parts[0]!r}")
        vs.append((parts[0], parts[1], env))
    for prob in a.prob:
        res = {n: [] for n, _, _ in vs}
        for r in range(a.rounds):
            for n, b, env in (vs if r % 2 == 0 else vs[::-1]):
                out = subprocess.run([b, "conv", prob, "--dir", a.dir, "--algo", a.algo, "--threads", a.threads,
                                      "--iters", a.iters, "--format", "csv", "-q", "--no-save"],
                                     env=env, capture_output=True, text=True)
                rows = list(csv.DictReader(io.StringIO(out.stdout)))
                if out.returncode != 0 or not rows:
                    sys.exit(f"abba_conv.py: {n} failed on {prob}: {out.stderr.strip()}")
                if rows[0].get("check_passed") == "false":
                    sys.exit(f"abba_conv.py: {n}'s output failed its check on {prob}")
                if not rows[0].get("ms_median"):
                    sys.exit(f"abba_conv.py: {n} gave no time on {prob}")
                res[n].append(float(rows[0]["ms_median"]))
        base = statistics.median(res[vs[0][0]])
        cols = " | ".join(f"{n} {statistics.median(x):.2f} ms ({base / statistics.median(x):.2f}x)" for n, x in res.items())
        print(f"{prob} {a.dir}: {cols}")


if __name__ == "__main__":
    main()
