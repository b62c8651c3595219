#!/usr/bin/env python3
"""Time cnnbench's input loader and torchvision's on the same files, interleaved.

Usage: python3 scripts/peers/side_by_side_data.py DIR [--threads 2] [--batch 64]
           [--transform train|eval] [--size 224] [--images 1000] [--rounds 4]
           [--cnnbench target/release/cnnbench] [--python .venv/bin/python] [--out FILE.md]

Both loaders read the same ImageFolder tree with the same number of
threads (cnnbench's --loader-threads, torchvision's DataLoader workers),
the same batch, transform and output size, after the same warm-up
batches. The rounds alternate in ABBA order (cnnbench, torchvision,
torchvision, cnnbench, ...), so drift on a shared machine falls on both
alike. Prints (and with --out writes) a markdown table of every round's
images/s, each tool's median, and the ratio of the medians.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def run_json(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"side_by_side_data.py: error: {' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--transform", choices=["train", "eval"], default="train")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=2, help="batches loaded before timing")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--cnnbench", default=os.path.join(ROOT, "target", "release", "cnnbench"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--out", help="also write the markdown here")
    a = ap.parse_args(argv)

    common = ["--batch", str(a.batch), "--transform", a.transform, "--size", str(a.size),
              "--images", str(a.images)]
    ours = [a.cnnbench, "data", "bench", a.dir, "--loader-threads", str(a.threads),
            "--warmup", str(a.warmup), "--format", "json", "--quiet", "--no-save", *common]
    peer = [a.python, os.path.join(HERE, "pytorch_data.py"), a.dir, "--workers", str(a.threads),
            "--warmup-batches", str(a.warmup), "--format", "json", *common]

    rows = []
    for r in range(a.rounds):
        order = [("cnnbench", ours), ("torchvision", peer)]
        if r % 2 == 1:
            order.reverse()
        for tool, cmd in order:
            out = run_json(cmd)
            ips = out["records"][0]["images_per_sec"] if tool == "cnnbench" else out["images_per_sec"]
            rows.append((r + 1, tool, ips))
            print(f"round {r + 1}: {tool}: {ips:.1f} images/s", file=sys.stderr)

    med = {t: statistics.median(ips for _, tool, ips in rows if tool == t)
           for t in ("cnnbench", "torchvision")}
    lines = [
        f"Loader alone on `{a.dir}`: {a.threads} thread(s)/worker(s), batch {a.batch}, "
        f"{a.transform} transform at {a.size}px, {a.images} images per round after {a.warmup} "
        f"warm-up batches, {a.rounds} rounds in ABBA order.",
        "",
        "| round | tool | images/s |",
        "|---:|---|---:|",
    ]
    lines += [f"| {r} | {tool} | {ips:.1f} |" for r, tool, ips in rows]
    lines += [
        "",
        f"Median images/s: cnnbench {med['cnnbench']:.1f}, torchvision {med['torchvision']:.1f}; "
        f"cnnbench / torchvision = **{med['cnnbench'] / med['torchvision']:.2f}x**",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
