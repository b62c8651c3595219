#!/usr/bin/env python3
"""Times `cnnbench report` over N generated records (issue 31: report was
quadratic in its records; it should grow as n log n).

    python3 scripts/dev/report_scale.py --bin target/release/cnnbench 25000 50000 100000

Writes, per N, a results folder of conv runs (10 records each, at 1, 2 and
4 threads on N/30 hosts, problems cycling over 997) and one model CSV of
N/2 rows pairing along batch and input, then prints the seconds `report`
took. Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def environment(host, threads):
    return {"host": f"h{host}", "os": "linux", "cpu": "Xeon", "cores": 2, "threads": threads,
            "isa": "avx512", "isa_detected": "avx512", "timer": "wall",
            "timestamp": "2026-11-26T00:00:00Z",
            "cnnbench": {"version": "0.1.0", "git": "abc", "profile": "release", "target_features": ""}}


def record(i):
    return {"problem": f"mb{1 + i % 997}ic8ih9oc16oh7kh3", "dir": "fwd", "device": "cpu", "dtype": "f32",
            "layout": "nchw", "algo": "direct",
            "ms": {"min": 1, "median": 1 + (i % 3), "max": 2, "mean": 1.5, "stddev": 0.1},
            "runs": 5, "gflops": 3.0, "kernel": "x", "bias": False, "workspace_bytes": 0}


def write_store(d, n):
    runs = n // 2 // 10
    for r in range(runs):
        doc = {"format_version": 1, "subcommand": "conv", "environment": environment(r // 3, 1 << (r % 3)),
               "records": [record(r * 10 + k) for k in range(10)], "complete": True}
        with open(os.path.join(d, f"c{r}.json"), "w") as f:
            json.dump(doc, f)
    rows = n - runs * 10
    with open(os.path.join(d, "models.csv"), "w") as f:
        f.write("model,batch,device,dtype,layout,params,macs,status,total_ms_min,total_ms_median,"
                "total_ms_max,images_per_sec,input\n")
        for i in range(rows):
            f.write(f"m{i % 5000},{16 << (i % 2)},cpu,f32,nchw,1,1,ok,1,{1 + i % 7},2,{100 + i % 11},"
                    f"{'folder' if i % 3 == 0 else 'synthetic'}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/cnnbench")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("counts", type=int, nargs="*", default=[25_000, 50_000, 100_000])
    a = ap.parse_args()
    for n in a.counts:
        with tempfile.TemporaryDirectory() as d:
            write_store(d, n)
            t0 = time.monotonic()
            try:
                r = subprocess.run([a.bin, "report", d], capture_output=True, timeout=a.timeout)
                took = time.monotonic() - t0
                print(f"{n} records: {took:.2f} s (exit {r.returncode}, {len(r.stdout)} bytes)", flush=True)
            except subprocess.TimeoutExpired:
                print(f"{n} records: more than {a.timeout:.0f} s (stopped)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
