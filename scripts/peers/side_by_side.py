#!/usr/bin/env python3
"""Time cnnbench and PyTorch on the same problems, interleaved, and compare.

Usage: python3 scripts/peers/side_by_side.py --out DIR [--from builtin:resnet50|FILE]
           [--rounds 2] [--threads N] [--cnnbench target/release/cnnbench]
           [--python .venv/bin/python] [-- extra cnnbench conv options]
       python3 scripts/peers/side_by_side.py --out DIR --models NAME[:BATCH]...|keras
           [--batch 16] [--device cpu|gpu] [--dtype f32] [--layout nhwc]
           [--threads N] [--warmup N] [--iters N] [--min-time SECS] [--update sgd]
           [--rounds 2] [--cnnbench ...] [--python ...] [-- extra cnnbench model options]

On a shared machine the speed available drifts from minute to minute, so
timing one tool over a whole list and then the other confounds the tools
with the drift. This driver alternates them problem by problem, in ABBA
order across rounds (round 1: cnnbench then PyTorch, round 2: PyTorch then
cnnbench, ...), and keeps for each tool its best median per problem and
direction over the rounds. Both tools are treated alike: --threads, when
given, goes to both (else each uses its default, every core).

Writes DIR/cnnbench.csv and DIR/pytorch.csv (best rows, cnnbench's CSV
contract), DIR/*_all.csv (every round) and DIR/compare.md (from compare.py,
with % of peak against the best FMA peak cnnbench measured in any round).

With --models, whole training steps instead of convolutions: `cnnbench model
NAME --format csv -q` beside `pytorch_model.py NAME` (scripts/peers), one
process per model and tool, ABBA over rounds as above, both with the same
--batch (or the model's own NAME:BATCH; `keras` stands for the six Keras
examples at their Keras batch sizes: mnist-mlp:128 mnist-cnn:128
cifar10-cnn:32 imdb-fasttext:32 imdb-bilstm:32 lstm-text:128), --device
(gpu is pytorch_model.py's cuda), --dtype, --layout, and --threads,
--warmup, --iters, --min-time, --update when given (else each tool's
defaults); both get the MALLOC_ settings. Options after `--` go to cnnbench
only. Keeps each tool's best total_ms_median per (model, batch):
DIR/cnnbench.csv and DIR/pytorch.csv (each tool's own columns),
DIR/*_all.csv, and DIR/compare.md: per model the fwd, bwd and total medians
of both, PyTorch's total over cnnbench's (above 1: cnnbench faster), and
whether the two count the same parameters and MACs.
"""
import argparse
import csv
import io
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import compare  # noqa: E402

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


KERAS_BATCHES = [("mnist-mlp", 128), ("mnist-cnn", 128), ("cifar10-cnn", 32), ("imdb-fasttext", 32),
                 ("imdb-bilstm", 32), ("lstm-text", 128)]


def model_list(names, batch):
    out = []
    for n in names:
        if n == "keras":
            out += KERAS_BATCHES
            continue
        name, _, b = n.partition(":")
        if b and not (b.isdigit() and int(b) > 0):
            sys.exit(f"side_by_side.py: error: bad batch in '{n}' (NAME:BATCH)")
        out.append((name, int(b) if b else batch))
    return out


def run_models(a, extra):
    """--models: whole training steps, cnnbench model beside pytorch_model.py, ABBA."""
    shared = ["--dtype", a.dtype, "--layout", a.layout]
    for opt, v in (("--threads", a.threads), ("--warmup", a.warmup), ("--iters", a.iters),
                   ("--min-time", a.min_time), ("--update", a.update)):
        if v is not None:
            shared += [opt, str(v)]
    ours_cmd = lambda m, b: ([a.cnnbench, "model", m, "--batch", str(b), "--device", a.device]
                             + shared + ["--format", "csv", "--quiet"] + extra)
    peer_cmd = lambda m, b: ([a.python, os.path.join(HERE, "pytorch_model.py"), m, "--batch", str(b),
                              "--device", "cuda" if a.device == "gpu" else "cpu"] + shared)
    jobs = model_list(a.models, a.batch)
    rows = {"cnnbench": [], "pytorch": []}
    for rnd in range(a.rounds):
        for i, (m, b) in enumerate(jobs):
            order = ["cnnbench", "pytorch"] if rnd % 2 == 0 else ["pytorch", "cnnbench"]
            for tool in order:
                got = run_csv(ours_cmd(m, b) if tool == "cnnbench" else peer_cmd(m, b), PEER_ENV)
                for r in got:
                    r["round"] = str(rnd)
                rows[tool] += got
            sys.stderr.write(f"\rround {rnd + 1}/{a.rounds}: {i + 1}/{len(jobs)} models")
    sys.stderr.write("\n")

    def total(r):
        try:
            return float(r["total_ms_median"])
        except (KeyError, ValueError):
            return float("inf")  # OOM, unavailable

    best = {}
    for tool, rs in rows.items():
        fields = list(dict.fromkeys(k for r in rs for k in r))
        with open(os.path.join(a.out, f"{tool}_all.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            w.writeheader()
            w.writerows(rs)
        best[tool] = {}
        for r in rs:
            k = (r["model"], r["batch"])
            if k not in best[tool] or total(r) < total(best[tool][k]):
                best[tool][k] = r
        with open(os.path.join(a.out, f"{tool}.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[x for x in fields if x != "round"], lineterminator="\n",
                               extrasaction="ignore")
            w.writeheader()
            w.writerows(best[tool].values())
    peer_dev = next((r["device"] for r in rows["pytorch"] if r.get("device")), "pytorch")
    lines = [f"Training steps, {a.device} {a.dtype} {a.layout}, best of {a.rounds} ABBA round(s) per tool "
             f"(medians in ms; PyTorch: {peer_dev})", "",
             "| model | batch | cnnbench fwd | cnnbench bwd | cnnbench total | PyTorch fwd | PyTorch bwd "
             "| PyTorch total | PyTorch / cnnbench | params, MACs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m, b in dict.fromkeys(jobs):
        k = (m, str(b))
        c, p = best["cnnbench"].get(k, {}), best["pytorch"].get(k, {})
        cell = lambda r, col: r.get(col) or r.get("status") or "-"  # noqa: E731
        ratio = f"{total(p) / total(c):.2f}" if math.isfinite(total(c)) and math.isfinite(total(p)) else "-"
        same = ("same" if (c.get("params"), c.get("macs")) == (p.get("params"), p.get("macs"))
                else f"DIFFER: cnnbench {c.get('params')}, {c.get('macs')}; "
                     f"PyTorch {p.get('params')}, {p.get('macs')}")
        lines.append(f"| {m} | {b} | {cell(c, 'fwd_ms_median')} | {cell(c, 'bwd_ms_median')} | "
                     f"{cell(c, 'total_ms_median')} | {cell(p, 'fwd_ms_median')} | {cell(p, 'bwd_ms_median')} | "
                     f"{cell(p, 'total_ms_median')} | {ratio} | {same} |")
    md = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "compare.md"), "w").write(md)
    print(md)


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
    ap.add_argument("--models", nargs="+", metavar="NAME[:BATCH]",
                    help="whole training steps of these models (or keras) instead of --from's convolutions")
    ap.add_argument("--batch", type=int, help="--models: batch of NAMEs without :BATCH (default 16)")
    ap.add_argument("--device", choices=["cpu", "gpu"], help="--models: default cpu")
    ap.add_argument("--dtype", choices=["f32", "tf32", "f16", "bf16"], help="--models: default f32")
    ap.add_argument("--layout", choices=["nhwc", "nchw"], help="--models: default nhwc")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--iters", type=int)
    ap.add_argument("--min-time", type=float)
    ap.add_argument("--update", choices=["sgd"])
    a = ap.parse_args(argv)
    if not a.models:
        given = [o for o, v in (("--batch", a.batch), ("--device", a.device), ("--dtype", a.dtype),
                                ("--layout", a.layout), ("--warmup", a.warmup),
                                ("--iters", a.iters), ("--min-time", a.min_time), ("--update", a.update))
                 if v is not None]
        if given:
            ap.error(f"{', '.join(given)} only with --models (conv options go after --)")
    os.makedirs(a.out, exist_ok=True)
    if a.models:
        a.batch = 16 if a.batch is None else a.batch
        a.device, a.dtype, a.layout = a.device or "cpu", a.dtype or "f32", a.layout or "nhwc"
        return run_models(a, extra)
    threads = [] if a.threads is None else ["--threads", str(a.threads)]
    ours_cmd = lambda d: [a.cnnbench, "conv", d, "--format", "csv", "--quiet"] + threads + extra
    peer_cmd = lambda d: [a.python, os.path.join(HERE, "pytorch_conv.py"), d] + threads
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
    peak = compare.best_peak(rows["cnnbench"])
    if peak is None:
        sys.exit("side_by_side.py: error: no cnnbench row has a % of peak")
    md = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), os.path.join(a.out, "cnnbench.csv"),
                         os.path.join(a.out, "pytorch.csv"), "--peak-gflops", repr(peak)],
                        capture_output=True, text=True, check=True).stdout
    md = f"FP32 peak (best FMA-loop measurement of any cnnbench round): {peak:.1f} GFLOP/s\n\n" + md
    open(os.path.join(a.out, "compare.md"), "w").write(md)
    print(md)


if __name__ == "__main__":
    main(sys.argv[1:])
