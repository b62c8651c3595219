#!/usr/bin/env python3
"""Two cnnbench binaries on one command line, in ABBA order: medians and ratios.

usage: scripts/dev/abba_bins.py ROUNDS BEFORE AFTER -- SUBCOMMAND ARGS...
  e.g. scripts/dev/abba_bins.py 4 ./old ./new -- rnn --device cpu --threads 2 \\
           --iters 20 --dir fwd,bwd-data --from builtin:small-rnn

Round r runs BEFORE then AFTER when r is even, AFTER then BEFORE when it is
odd, each `BIN SUBCOMMAND ARGS... --format csv --no-save --quiet`, and keeps
every row's median (`ms_median`), keyed by its problem and direction. Prints
per row each binary's median over the rounds and BEFORE's over AFTER's
(above 1: AFTER is faster), then the median of those ratios. ABENV=VAR=VALUE,...
adds variables to both binaries' environment. A run that fails stops the
script. Standard library only (for `conv`, `abba_conv.py` also checks each
run's result column)."""
import csv
import io
import os
import statistics
import subprocess
import sys


def main():
    if "--" not in sys.argv or sys.argv.index("--") != 4:
        sys.exit(__doc__)
    rounds, before, after = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    args = sys.argv[5:]
    extra = dict(kv.split("=", 1) for kv in os.environ.get("ABENV", "").split(",") if "=" in kv)
    env = {**os.environ, **extra}

    def run(binary):
        out = subprocess.run([binary, *args, "--format", "csv", "--no-save", "--quiet"],
                             capture_output=True, text=True, env=env)
        if out.returncode != 0:
            sys.exit(f"abba_bins.py: {binary} failed: {out.stderr.strip()}")
        rows = list(csv.DictReader(io.StringIO(out.stdout)))
        if not rows:
            sys.exit(f"abba_bins.py: {binary} gave no rows")
        return {f"{r.get('problem', '')} {r.get('dir', '')}": float(r["ms_median"]) for r in rows}

    # By position, so that the same binary twice (an A/A run) works too.
    times = ([], [])
    for r in range(rounds):
        for side in (0, 1) if r % 2 == 0 else (1, 0):
            times[side].append(run((before, after)[side]))
    ratios = []
    for key in times[0][0]:
        a = statistics.median(t[key] for t in times[0])
        b = statistics.median(t[key] for t in times[1])
        ratios.append(a / b)
        print(f"{key:50s} A {a:8.3f}  B {b:8.3f}  A/B {a / b:5.3f}")
    print(f"median A/B {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
