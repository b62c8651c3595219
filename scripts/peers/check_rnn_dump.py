#!/usr/bin/env python3
"""Recompute a `cnnbench rnn --dump DIR` in PyTorch and compare.

Usage: .venv/bin/python scripts/peers/check_rnn_dump.py DIR [--tolerance 1e-5]

DIR holds problem.json and the .npy files cnnbench wrote: the inputs
(x, hx, cx), the parameters under nn.RNN/nn.LSTM/nn.GRU's names
(weight_ih_l0, bias_hh_l1_reverse, ...), the output gradients (dy, dhy,
dcy) and the outputs of the passes that ran (y, hy, cy; dx, dhx, dcx;
grad_<parameter>). Each layer and direction is rebuilt as a one-layer
PyTorch module holding those parameters (so right2left and
bidirectional-sum, which nn.LSTM has no option for, are composed the same
way: a right2left direction reads the sequence flipped), run forward with
autograd, and differentiated with the dumped output gradients.

Prints the relative L2 error of every dumped output; exits 1 if any is
above --tolerance, 2 on bad input.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch


def load(d, name):
    return torch.from_numpy(np.load(os.path.join(d, name + ".npy"))).double()


def rel_l2(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    norm = np.linalg.norm(want)
    diff = np.linalg.norm(got - want)
    return diff / norm if norm > 0 else diff


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    a = ap.parse_args(argv)
    try:
        with open(os.path.join(a.dir, "problem.json")) as f:
            p = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_rnn_dump.py: error: {e}", file=sys.stderr)
        return 2
    names = {f["name"] for f in p["files"]}
    cell, direction = p["cell"], p["direction"]
    layers, hidden = p["layers"], p["hidden"]
    dirs = 2 if direction.startswith("bidirectional") else 1
    lstm = cell == "lstm"
    torch.set_default_dtype(torch.float64)

    x = load(a.dir, "x").requires_grad_()
    hx = load(a.dir, "hx").requires_grad_()
    cx = load(a.dir, "cx").requires_grad_() if lstm else None
    params = {}
    for n in names:
        if n.startswith(("weight_", "bias_")):
            params[n] = load(a.dir, n).requires_grad_()

    def one_layer(inp, s, suffix, reverse):
        """One layer and direction: PyTorch's module with the dumped weights."""
        in_f = inp.shape[2]
        if cell == "lstm":
            m = torch.nn.LSTM(in_f, hidden)
        elif cell == "gru":
            m = torch.nn.GRU(in_f, hidden)
        else:
            m = torch.nn.RNN(in_f, hidden, nonlinearity="relu" if cell == "rnn-relu" else "tanh")
        l = s // dirs
        w = {k: params[f"{k}_l{l}{suffix}"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        seq = torch.flip(inp, [0]) if reverse else inp
        h0 = hx[s:s + 1]
        state = (h0, cx[s:s + 1]) if lstm else h0
        out, last = torch.func.functional_call(
            m, {f"{k}_l0": v for k, v in w.items()}, (seq, state))
        if reverse:
            out = torch.flip(out, [0])
        hy, cy = (last[0][0], last[1][0]) if lstm else (last[0], None)
        return out, hy, cy

    inp = x
    hys, cys = [], []
    for l in range(layers):
        outs = []
        for d in range(dirs):
            s = l * dirs + d
            suffix = "_reverse" if d == 1 else ""
            reverse = direction == "right2left" or d == 1
            out, hy, cy = one_layer(inp, s, suffix, reverse)
            outs.append(out)
            hys.append(hy)
            cys.append(cy)
        if direction == "bidirectional-concat":
            inp = torch.cat(outs, dim=2)
        elif direction == "bidirectional-sum":
            inp = outs[0] + outs[1]
        else:
            inp = outs[0]
    y = inp
    hy = torch.stack(hys)
    cy = torch.stack(cys) if lstm else None

    results = []
    if "y" in names:
        results += [("y", y), ("hy", hy)] + ([("cy", cy)] if lstm else [])
    want_grads = [n for n in names if n.startswith("grad_")] + [n for n in ("dx", "dhx", "dcx") if n in names]
    if want_grads:
        outs = [y, hy] + ([cy] if lstm else [])
        grads = [load(a.dir, "dy"), load(a.dir, "dhy")] + ([load(a.dir, "dcy")] if lstm else [])
        wrt = [x, hx] + ([cx] if lstm else []) + list(params.values())
        got = torch.autograd.grad(outs, wrt, grads, allow_unused=True)
        by_name = {"dx": got[0], "dhx": got[1]}
        if lstm:
            by_name["dcx"] = got[2]
        base = 3 if lstm else 2
        for k, n in enumerate(params):
            by_name["grad_" + n] = got[base + k]
        results += [(n, by_name[n]) for n in sorted(want_grads)]
    worst = 0.0
    failed = False
    for name, t in results:
        e = rel_l2(np.load(os.path.join(a.dir, name + ".npy")), t.detach().numpy())
        worst = max(worst, e)
        ok = e <= a.tolerance
        failed |= not ok
        print(f"{name:28s} relative L2 {e:.2e} {'ok' if ok else 'FAILED'}")
    print(f"{p['problem']}: worst {worst:.2e} over {len(results)} tensors "
          f"(torch {torch.__version__}, float64): {'FAILED' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
