#!/usr/bin/env python3
"""Time cnnbench's RNN kernels and PyTorch's on the same problems, interleaved.

Usage: python3 scripts/peers/side_by_side_rnn.py [--from builtin:deepbench-rnn|FILE]
           [--only REGEX] [--threads 2] [--rounds 2] [--warmup 1] [--iters 3]
           [--cnnbench target/release/cnnbench] [--python .venv/bin/python] [--out FILE.md]

For each problem the two tools alternate in ABBA order across rounds
(round 1: cnnbench then PyTorch, round 2: PyTorch then cnnbench, ...), each
with the same threads, warm-up and timed runs, so that drift on a shared
machine falls on both alike. cnnbench times its three passes (fwd,
bwd-data, bwd-weights); PyTorch times the forward and the whole backward,
so cnnbench's backward is bwd-data + bwd-weights. Each tool's median of
its per-round medians is kept, and the ratio PyTorch ms / cnnbench ms is
printed per problem with the median over problems (above 1: cnnbench is
faster). Writes the markdown table to --out as well.
"""
import argparse
import csv
import io
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LISTS = {"deepbench-rnn": "deepbench_rnn_training.txt", "small-rnn": "small_rnn.txt"}


def lines_of(source):
    if source.startswith("builtin:"):
        name = source[len("builtin:"):]
        source = os.path.join(ROOT, "src", "problem", "lists", LISTS.get(name, name + ".txt"))
    with open(source, encoding="utf-8-sig") as f:
        return [l.split("#")[0].strip() for l in f if l.split("#")[0].strip()]


def run_csv(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"side_by_side_rnn.py: error: {' '.join(cmd)} failed: {res.stderr.strip()}")
    return list(csv.DictReader(io.StringIO(res.stdout)))


def ours(a, line):
    rows = run_csv([a.cnnbench, "rnn", *line.split(), "--device", "cpu", "--threads", str(a.threads),
                    "--warmup", str(a.warmup), "--iters", str(a.iters),
                    "--format", "csv", "--no-save", "--quiet"])
    ms = {r["dir"]: float(r["ms_median"]) for r in rows}
    return {"fwd": ms["fwd"], "bwd": ms["bwd-data"] + ms["bwd-weights"]}


def peer(a, line):
    rows = run_csv([a.python, os.path.join(HERE, "pytorch_rnn.py"), "--threads", str(a.threads),
                    "--warmup", str(a.warmup), "--iters", str(a.iters), "--", line])
    return {r["pass"]: float(r["ms_median"]) for r in rows}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="source", default="builtin:deepbench-rnn")
    ap.add_argument("--only", help="keep problems whose line matches this regex")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--cnnbench", default=os.path.join(ROOT, "target", "release", "cnnbench"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    lines = select(a.source, a.only)
    if not lines:
        sys.exit("side_by_side_rnn.py: error: no problem selected")
    text = render(a, run(a, lines))
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


def select(source, only=None):
    """The problem lines of `source`, those matching `only` where given."""
    return [l for l in lines_of(source) if not only or re.search(only, l)]


def run(a, lines):
    """Per problem line, each tool's median ms of fwd and bwd over the rounds
    (ABBA) and PyTorch ms / cnnbench ms: {"problem", "cnnbench", "pytorch", "ratio"}."""
    out = []
    for line in lines:
        got = {"cnnbench": [], "pytorch": []}
        for r in range(a.rounds):
            order = [("cnnbench", ours), ("pytorch", peer)]
            if r % 2 == 1:
                order.reverse()
            for name, f in order:
                got[name].append(f(a, line))
        med = {k: {p: statistics.median(x[p] for x in v) for p in ("fwd", "bwd")} for k, v in got.items()}
        row = {"problem": line, **med, "ratio": {p: med["pytorch"][p] / med["cnnbench"][p] for p in ("fwd", "bwd")}}
        out.append(row)
        print(f"{line}: fwd {row['ratio']['fwd']:.2f}x, bwd {row['ratio']['bwd']:.2f}x", file=sys.stderr)
    return out


def render(a, rows):
    """The markdown table of `run`'s rows, with the medians over problems."""
    out = [f"RNN kernels on `{a.source}`{' matching ' + repr(a.only) if a.only else ''}: "
           f"{a.threads} thread(s), {a.warmup} warm-up and {a.iters} timed runs per pass, "
           f"{a.rounds} rounds in ABBA order; ms are medians over the rounds of each round's median.",
           "",
           "| problem | cnnbench fwd | PyTorch fwd | fwd ratio | cnnbench bwd | PyTorch bwd | bwd ratio |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [r["problem"]]
        for p in ("fwd", "bwd"):
            cells += [f"{r['cnnbench'][p]:.2f}", f"{r['pytorch'][p]:.2f}", f"{r['ratio'][p]:.2f}x"]
        out.append("| " + " | ".join(cells) + " |")
    med = {p: statistics.median(r["ratio"][p] for r in rows) for p in ("fwd", "bwd")}
    out += ["",
            f"Median PyTorch / cnnbench over {len(rows)} problems: forward **{med['fwd']:.2f}x**, "
            f"backward **{med['bwd']:.2f}x**."]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main(sys.argv[1:])
