#!/usr/bin/env python3
"""Recompute a `cnnbench conv --dump DIR` with PyTorch and compare.

Usage: .venv/bin/python scripts/peers/check_dump.py DIR [DIR ...]

Reads problem.json and the float32 .npy files (logical N,C,H,W and
K,C/g,R,S order), recomputes every output that was dumped in float64 with
torch, and prints the relative L2 error of each. Exits 1 if any error is
above 1e-5 (cnnbench's fp32 threshold), 2 on bad input.
"""
import json
import os
import sys

import numpy as np
import torch


def rel_l2(got, want):
    den = np.linalg.norm(want)
    num = np.linalg.norm(got.astype(np.float64) - want)
    return num / den if den > 0 else num


def check(folder):
    meta = json.load(open(os.path.join(folder, "problem.json")))
    p = meta["shape"]
    load = lambda name: torch.from_numpy(np.load(os.path.join(folder, name + ".npy")).astype(np.float64))
    src, wei, bias, diff_dst = load("src"), load("wei"), load("bias"), load("diff_dst")
    kw = dict(stride=(p["sh"], p["sw"]), padding=(p["ph"], p["pw"]),
              dilation=(p["dh"] + 1, p["dw"] + 1), groups=p["g"])
    # PyTorch pads symmetrically; cnnbench's output size is given, so crop.
    out_hw = (p["oh"], p["ow"])
    src.requires_grad_(True)
    wei.requires_grad_(True)
    bias.requires_grad_(True)
    dst = torch.nn.functional.conv2d(src, wei, bias, **kw)[:, :, :out_hw[0], :out_hw[1]]
    dst.backward(diff_dst)
    want = {"dst": dst.detach(), "diff_src": src.grad, "diff_wei": wei.grad, "diff_bias": bias.grad}
    worst = 0.0
    for f in meta["files"]:
        name = f["name"]
        if name in want:
            err = rel_l2(np.load(os.path.join(folder, f["file"])), want[name].numpy())
            worst = max(worst, err)
            print(f"{meta['problem']} {name}: rel_l2 {err:.2e}")
    return worst


def main(argv):
    if not argv:
        sys.stderr.write("check_dump.py: error: give at least one dump folder\n")
        return 2
    worst = 0.0
    for d in argv:
        if not os.path.exists(os.path.join(d, "problem.json")):
            subs = sorted(os.path.join(d, s) for s in os.listdir(d) if os.path.isdir(os.path.join(d, s)))
        else:
            subs = [d]
        for s in subs:
            worst = max(worst, check(s))
    return 1 if worst > 1e-5 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
