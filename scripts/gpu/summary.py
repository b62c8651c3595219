#!/usr/bin/env python3
"""Summarises a scripts/gpu/check.sh folder: --check results, the auto
(FindEx winner, then timed by cnnbench) time against cuDNN's own FindEx
time, and the best algorithm per layer, direction, dtype and layout."""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "gpu-check-out"
rows, skipped = [], []
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    if os.path.basename(path) == "info.json":
        continue
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{path}: unreadable ({e})")
        continue
    for r in doc.get("records", []):
        r["file"] = os.path.basename(path)
        rows.append(r)
    skipped += doc.get("skipped", [])

checked = [r for r in rows if r.get("check")]
failed = [r for r in checked if not r["check"]["passed"]]
print(f"# GPU check summary ({out})\n")
print(f"- records: {len(rows)}; checked: {len(checked)}; failed: {len(failed)}; not timed: {len(skipped)}")
for r in failed:
    print(f"  - FAILED {r['file']}: {r['problem']} {r['dir']} {r['dtype']} {r['layout']} "
          f"{r['algo']} rel err {r['check']['rel_err']}")
for s in skipped[:20]:
    print(f"  - not timed: {s['problem']} {s['dir']} {s['dtype']} {s['layout']} {s['algo']}: {s['status']}")

pairs = [(r["ms"]["median"] / r["cudnn_find_ms"], r["ms"]["min"] / r["cudnn_find_ms"], r)
         for r in rows if r.get("cudnn_find_ms")]
if pairs:
    med = [p[0] for p in pairs]
    mins = [p[1] for p in pairs]
    over = [p for p in pairs if p[0] > 1.03]
    print(f"\n## auto vs cuDNN FindEx ({len(pairs)} layer-directions)\n")
    print(f"- cnnbench median / FindEx time: median {statistics.median(med):.3f}, "
          f"max {max(med):.3f}; over 1.03: {len(over)}")
    print(f"- cnnbench min / FindEx time: median {statistics.median(mins):.3f}, max {max(mins):.3f}")
    for ratio, _, r in sorted(over, key=lambda p: -p[0])[:10]:
        print(f"  - {ratio:.3f} {r['problem']} {r['dir']} {r['dtype']} {r['layout']} {r['algo']} "
              f"({r['ms']['median']:.4f} ms vs {r['cudnn_find_ms']:.4f} ms)")

r50 = [r for r in rows if r["file"].startswith("r50_")]
if r50:
    print("\n## builtin:resnet50 (auto): best algorithm per layer\n")
    print("| layer | dir | dtype | layout | algorithm | ms | TFLOP/s | % peak |")
    print("|---|---|---|---|---|---:|---:|---:|")
    for r in r50:
        pf = r.get("peak_fraction")
        print(f"| {r['problem']} | {r['dir']} | {r['dtype']} | {r['layout']} | {r['algo']} | "
              f"{r['ms']['median']:.4f} | {r['gflops'] / 1e3:.1f} | "
              f"{'-' if pf is None else f'{pf * 100:.1f}'} |")
