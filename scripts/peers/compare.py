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


def best_peak(rows):
    """The best FMA peak (GFLOP/s) behind any of cnnbench's rows (gflops over
    peak_fraction), or None where no row has one."""
    peaks = [float(r["gflops"]) / float(r["peak_fraction"]) for r in rows if r.get("peak_fraction")]
    return max(peaks, default=None)


def rows(ours, peer, peak_gflops=None):
    """One dict per (problem, dir) in both: times, ratio, % peak, 3x3 or not."""
    out = []
    for k in (k for k in ours if k in peer):
        o, p = ours[k], peer[k]
        om, pm = float(o["ms_median"]), float(p["ms_median"])
        if o["peak_fraction"]:
            peak = peak_gflops or float(o["gflops"]) / float(o["peak_fraction"])
        else:
            peak = peak_gflops
        name = k[0].split('n"')[-1].rstrip('"') if 'n"' in k[0] else k[0]
        out.append({"problem": k[0], "name": name, "dir": k[1], "algo": o["algo"], "ms": om, "peer_ms": pm,
                    "ratio": pm / om, "pct": float(o["gflops"]) / peak * 100 if peak else float("nan"),
                    "peer_pct": float(p["gflops"]) / peak * 100 if peak else float("nan"),
                    "is_3x3": kernel_size(k[0]) == 3})
    return out


def summary(rs):
    """Per direction: layers, median/min/max ratio, min/median % peak of the 3x3 layers."""
    out = {}
    for d in ["fwd", "bwd-data", "bwd-filter"]:
        r = [x["ratio"] for x in rs if x["dir"] == d]
        if not r:
            continue
        p3 = [x["pct"] for x in rs if x["dir"] == d and x["is_3x3"]] or [float("nan")]
        out[d] = {"layers": len(r), "median": statistics.median(r), "min": min(r), "max": max(r),
                  "min_3x3_pct": min(p3), "median_3x3_pct": statistics.median(p3)}
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("peer")
    ap.add_argument("--peak-gflops", type=float, help="machine peak for % of peak (default: from cnnbench's rows)")
    a = ap.parse_args(argv)
    ours, peer = load(a.ours), load(a.peer)
    rs = rows(ours, peer, a.peak_gflops)
    if not rs:
        sys.exit("compare.py: error: no (problem, dir) rows in common")
    peer_name = peer[(rs[0]["problem"], rs[0]["dir"])]["algo"]
    print(f"| problem | dir | cnnbench algo | cnnbench ms | {peer_name} ms | ratio (peer/cnnbench) | cnnbench % peak | {peer_name} % peak |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for x in rs:
        print(f"| {x['name']} | {x['dir']} | {x['algo']} | {x['ms']:.3f} | {x['peer_ms']:.3f} | {x['ratio']:.2f} "
              f"| {x['pct']:.1f} | {x['peer_pct']:.1f} |")
    print()
    print("| dir | layers | median ratio (peer/cnnbench) | min ratio | max ratio | 3x3 layers: min % peak | 3x3 median % peak |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for d, v in summary(rs).items():
        print(f"| {d} | {v['layers']} | {v['median']:.2f} | {v['min']:.2f} | {v['max']:.2f} "
              f"| {v['min_3x3_pct']:.1f} | {v['median_3x3_pct']:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
