#!/usr/bin/env python3
"""Put a peer's CSV beside cnnbench's CSV: per-layer times, ratios, and the
per-direction summary (median over layers of peer time / cnnbench time).

Usage: python3 scripts/peers/compare.py CNNBENCH.csv PEER.csv [--peak-gflops X]

Both files use cnnbench's CSV columns; rows are joined on (problem, dir).
A ratio above 1 means cnnbench is faster. Standard library only.
"""
import argparse
import csv
import statistics
import sys


def load(path):
    with open(path, newline="") as f:
        return {(r["problem"], r["dir"]): r for r in csv.DictReader(f)}


def kernel_size(problem):
    # "...kh3..." -> 3; the descriptor is canonical, so kh is always present.
    i = problem.index("kh") + 2
    j = i
    while j < len(problem) and problem[j].isdigit():
        j += 1
    return int(problem[i:j])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("peer")
    ap.add_argument("--peak-gflops", type=float, help="machine peak for % of peak (default: from cnnbench's rows)")
    a = ap.parse_args(argv)
    ours, peer = load(a.ours), load(a.peer)
    keys = [k for k in ours if k in peer]
    if not keys:
        sys.exit("compare.py: error: no (problem, dir) rows in common")
    peer_name = peer[keys[0]]["algo"]
    print(f"| problem | dir | cnnbench algo | cnnbench ms | {peer_name} ms | ratio (peer/cnnbench) | cnnbench % peak | {peer_name} % peak |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    ratios, peaks3x3 = {}, {}
    for k in keys:
        o, p = ours[k], peer[k]
        om, pm = float(o["ms_median"]), float(p["ms_median"])
        ratio = pm / om
        ratios.setdefault(k[1], []).append(ratio)
        if o["peak_fraction"]:
            peak = a.peak_gflops or float(o["gflops"]) / float(o["peak_fraction"])
        else:
            peak = a.peak_gflops
        op = float(o["gflops"]) / peak * 100 if peak else float("nan")
        pp = float(p["gflops"]) / peak * 100 if peak else float("nan")
        if kernel_size(k[0]) == 3:
            peaks3x3.setdefault(k[1], []).append(op)
        name = k[0].split('n"')[-1].rstrip('"') if 'n"' in k[0] else k[0]
        print(f"| {name} | {k[1]} | {o['algo']} | {om:.3f} | {pm:.3f} | {ratio:.2f} | {op:.1f} | {pp:.1f} |")
    print()
    print("| dir | layers | median ratio (peer/cnnbench) | min ratio | max ratio | 3x3 layers: min % peak | 3x3 median % peak |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for d in ["fwd", "bwd-data", "bwd-filter"]:
        if d not in ratios:
            continue
        r = ratios[d]
        p3 = peaks3x3.get(d, [float("nan")])
        print(f"| {d} | {len(r)} | {statistics.median(r):.2f} | {min(r):.2f} | {max(r):.2f} | {min(p3):.1f} | {statistics.median(p3):.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
