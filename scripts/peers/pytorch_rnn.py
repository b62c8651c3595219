#!/usr/bin/env python3
"""Time PyTorch's nn.RNN / nn.LSTM / nn.GRU on cnnbench's RNN problems.

Usage: python3 scripts/peers/pytorch_rnn.py [DESC ...] [--from builtin:deepbench-rnn|FILE]
           [--cell lstm] [--direction left2right] [--threads N] [--warmup 2] [--iters 5]
           [--device cpu|cuda] [--dtype f32|tf32|f16] [--format csv|json]

Problems are the lines `cnnbench rnn` reads: benchdnn RNN descriptors
(`l1t25mb16sic512`), optionally led by `--cell=X` and `--direction=Y`.
Each is built as PyTorch's module with the same sizes (time-major input,
`num_layers=l`, `bidirectional` for bidirectional-concat) and timed as a
training step's two halves: the forward with autograd recording, and the
whole backward (`torch.autograd.grad` of the output and final states
with respect to the input, initial states and every parameter), each
step's forward recorded anew.
PyTorch does not split the backward into data and weights as cuDNN does;
compare its `bwd` with cnnbench's bwd-data + bwd-weights.

CPU runs go through PyTorch's own kernels (oneDNN/MKL GEMMs); `--device
cuda` through cuDNN. right2left and bidirectional-sum have no PyTorch
module of their own and are reported as skipped.

--dtype (cuda only; the CPU runs f32): f32 is plain fp32, TF32 off for
cuDNN and cuBLAS (torch.backends.cudnn.allow_tf32 and
torch.backends.cuda.matmul.allow_tf32 False: cnnbench's f32 is cuDNN's
CUDNN_FMA_MATH), tf32 allows TF32 tensor-core math (PyTorch's own
default), f16 puts the module, inputs and states in float16. On cuda,
stderr gets one line: torch, the device, cuDNN and the dtype.

Prints CSV (problem, pass, ms_median, ms_min, ms_max, runs, threads,
torch) or JSON lines.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LISTS = {"deepbench-rnn": "deepbench_rnn_training.txt", "small-rnn": "small_rnn.txt"}
KEYS = ("l", "t", "mb", "sic", "slc", "dhc", "dic")


def list_lines(source):
    if source.startswith("builtin:"):
        name = source[len("builtin:"):]
        source = os.path.join(ROOT, "src", "problem", "lists", LISTS.get(name, name + ".txt"))
    with open(source, encoding="utf-8-sig") as f:
        return [l.split("#")[0].strip() for l in f if l.split("#")[0].strip()]


def parse(line, cell, direction):
    """One problem line as a dict; the same defaults as cnnbench's parser."""
    desc = None
    alg = activation = None
    for tok in line.split():
        if tok.startswith("--cell="):
            cell = tok.split("=", 1)[1]
        elif tok.startswith("--direction="):
            direction = tok.split("=", 1)[1]
        elif tok.startswith("--alg="):
            alg = tok.split("=", 1)[1].upper()
        elif tok.startswith("--activation="):
            activation = tok.split("=", 1)[1].upper()
        elif tok.startswith("--"):
            sys.exit(f"pytorch_rnn.py: error: {tok!r} in {line!r}: not an option this script reads")
        else:
            desc = tok
    # benchdnn's names, as cnnbench reads them (src/problem/rnn/cell.rs).
    if alg is not None:
        cells = {"VANILLA_LSTM": "lstm", "LBR_GRU": "gru",
                 "VANILLA_RNN": "rnn-tanh" if activation == "TANH" else "rnn-relu"}
        if alg not in cells:
            sys.exit(f"pytorch_rnn.py: error: --alg={alg} in {line!r}: not a cell cnnbench times")
        cell = cells[alg]
    direction = {"concat": "bidirectional-concat", "sum": "bidirectional-sum"}.get(direction, direction)
    if desc is None:
        sys.exit(f"pytorch_rnn.py: error: no descriptor in {line!r}")
    # No key holds an `n`: the first one starts the name.
    body, _, name = desc.partition("n")
    vals = dict(re.findall(r"(mb|sic|slc|dhc|dic|l|t)(\d+)", body.replace("_", "")))
    if "sic" not in vals:
        sys.exit(f"pytorch_rnn.py: error: {desc!r} has no sic")
    sic = int(vals["sic"])
    return {
        "l": int(vals.get("l", 1)),
        "t": int(vals.get("t", 1)),
        "mb": int(vals.get("mb", 2)),
        "sic": sic,
        "slc": int(vals.get("slc", sic)),
        "dhc": int(vals.get("dhc", sic)),
        "cell": cell,
        "direction": direction,
        "line": line,
        "name": name.strip('"') or None,
    }


def module(p, torch):
    kw = dict(num_layers=p["l"], bidirectional=p["direction"] == "bidirectional-concat")
    if p["cell"] == "lstm":
        return torch.nn.LSTM(p["slc"], p["dhc"], **kw)
    if p["cell"] == "gru":
        return torch.nn.GRU(p["slc"], p["dhc"], **kw)
    act = {"rnn-relu": "relu", "rnn-tanh": "tanh"}[p["cell"]]
    return torch.nn.RNN(p["slc"], p["dhc"], nonlinearity=act, **kw)


def stats(ms):
    return {"ms_median": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms), "runs": len(ms)}


def time_problem(p, torch, dev, warmup, iters, dtype=None):
    torch.manual_seed(0)
    dtype = dtype or torch.float32
    m = module(p, torch).to(dev, dtype)
    dirs = 2 if p["direction"] == "bidirectional-concat" else 1
    x = torch.rand(p["t"], p["mb"], p["slc"], device=dev, dtype=dtype, requires_grad=True)
    h0 = torch.rand(p["l"] * dirs, p["mb"], p["dhc"], device=dev, dtype=dtype, requires_grad=True)
    state = (h0, torch.rand_like(h0, requires_grad=True)) if p["cell"] == "lstm" else h0
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def fwd():
        return m(x, state)

    fwd_ms, bwd_ms = [], []
    for k in range(warmup + iters):
        sync()
        t0 = time.perf_counter()
        y, hy = fwd()
        sync()
        t1 = time.perf_counter()
        outs = [y] + (list(hy) if isinstance(hy, tuple) else [hy])
        grads = [torch.ones_like(o) * 0.01 for o in outs]
        inputs = [x] + (list(state) if isinstance(state, tuple) else [state]) + list(m.parameters())
        sync()
        t2 = time.perf_counter()
        torch.autograd.grad(outs, inputs, grads, retain_graph=False)
        sync()
        t3 = time.perf_counter()
        if k >= warmup:
            fwd_ms.append((t1 - t0) * 1e3)
            bwd_ms.append((t3 - t2) * 1e3)
    return stats(fwd_ms), stats(bwd_ms)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="*")
    ap.add_argument("--from", dest="source")
    ap.add_argument("--cell", default="lstm", choices=["rnn-relu", "rnn-tanh", "lstm", "gru"])
    ap.add_argument("--direction", default="left2right")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "tf32", "f16"])
    ap.add_argument("--format", default="csv", choices=["csv", "json"])
    a = ap.parse_args(argv)
    lines = list(a.problems)
    if a.source:
        lines += list_lines(a.source)
    if not lines:
        sys.exit("pytorch_rnn.py: error: no problem given")
    if a.device == "cpu" and a.dtype != "f32":
        sys.exit(f"pytorch_rnn.py: error: --dtype {a.dtype} needs --device cuda (the CPU runs f32 only)")
    import torch

    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    dtype = torch.float16 if a.dtype == "f16" else torch.float32
    if dev.type == "cuda":
        tf32 = a.dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cuDNN {torch.backends.cudnn.version()}, "
              f"dtype {a.dtype} (TF32 {'allowed' if tf32 else 'off'})", file=sys.stderr)
    if a.format == "csv":
        print("problem,pass,ms_median,ms_min,ms_max,runs,threads,torch")
    for line in lines:
        p = parse(line, a.cell, a.direction)
        if p["direction"] not in ("left2right", "bidirectional-concat"):
            print(f"pytorch_rnn.py: skipped {line!r}: no PyTorch module for {p['direction']}", file=sys.stderr)
            continue
        f, b = time_problem(p, torch, dev, a.warmup, a.iters, dtype)
        for name, s in (("fwd", f), ("bwd", b)):
            row = {"problem": line, "pass": name, **s, "threads": a.threads, "torch": torch.__version__}
            if a.format == "csv":
                print(f"\"{line}\",{name},{s['ms_median']:.4f},{s['ms_min']:.4f},{s['ms_max']:.4f},"
                      f"{s['runs']},{a.threads},{torch.__version__}")
            else:
                print(json.dumps(row))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
