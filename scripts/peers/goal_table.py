#!/usr/bin/env python3
"""Issue 29's goal table on this machine, in one run: cnnbench's CPU path beside PyTorch (oneDNN).

Usage: python3 scripts/peers/goal_table.py --out DIR [--threads N]
           [--cnnbench target/release/cnnbench] [--python .venv/bin/python]
           [--parts conv,step,rnn] [--conv-from builtin:resnet50] [--conv-rounds 2]
           [--model resnet50:16] [--step-rounds 3]
           [--rnn-rounds 3] [--rnn-iters 10] [--small-rnn builtin:small-rnn]
           [--deepbench-only REGEX] [--isa avx2]

Runs, one after another, each in ABBA order against PyTorch on the same
number of threads (default: the CPUs this process may run on):
- conv: side_by_side.py over the 23 ResNet-50 layers (--conv-from), every
  direction, into DIR/conv/ (compare.md, the CSVs);
- step: side_by_side.py --models resnet50:16 (--model), whole training steps,
  into DIR/step/;
- rnn: side_by_side_rnn.py's comparison over the small problems
  (--small-rnn) and DeepBench's training problems of hidden 256 and 512
  (--deepbench-only; its larger ones take minutes a pass on a few cores),
  into DIR/rnn-small.md and DIR/rnn-deepbench.md.

--isa avx2 caps both tools at AVX2 on an AVX-512 CPU, so that the AVX2 goals
can be measured on it: cnnbench through CNNBENCH_ISA, PyTorch through
ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN), MKL_ENABLE_INSTRUCTIONS=AVX2 (MKL's GEMMs)
and ATEN_CPU_CAPABILITY=avx2 (ATen's own vectorised kernels), all inherited
by every child run.

Then writes DIR/goal_table.md (the machine, this command, each goal with
what was measured and whether it is met, and the misses: the layers and
problems under their bars) and DIR/goals.json, and prints the markdown.
The goals are issue 29's: convolutions at a median of at least 1.10x oneDNN
per direction, none under 0.9x, 3x3 layers at 80% of the FMA peak in every
direction (the best peak cnnbench measured in any round, as side_by_side.py
takes it, scaled to the capped ISA's with --isa; Winograd's are effective
rates); every LSTM and GRU problem at
least 1.0x forward and backward; the ResNet-50 step at least 1.25x. Ratios
are PyTorch ms / cnnbench ms: above 1, cnnbench is faster. Standard library
only; the goal arithmetic is tested by test_goal_table.py without PyTorch.
"""
import argparse
import csv
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import side_by_side_rnn  # noqa: E402

PARTS = ("conv", "step", "rnn")
# What caps each tool at an ISA below the CPU's best (see --isa).
ISA_ENV = {"avx2": {"CNNBENCH_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                    "ATEN_CPU_CAPABILITY": "avx2"}}
DIRS = ("fwd", "bwd-data", "bwd-filter")
RNN_CELLS = r"--cell=(lstm|gru)\b"
CONV_MEDIAN, CONV_FLOOR, CONV_3X3_PCT, RNN_FLOOR, STEP_RATIO = 1.10, 0.90, 80.0, 1.0, 1.25


def machine(cnnbench, threads):
    """What ran: cnnbench's info on `threads` threads (CPU, ISA, peak, bandwidth) and the CPU's family and model."""
    res = subprocess.run([cnnbench, "info", "--format", "json", "--threads", str(threads)],
                         capture_output=True, text=True, check=True)
    info = json.loads(res.stdout)
    cpuinfo = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                cpuinfo.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    version = subprocess.run([cnnbench, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return {"cnnbench": version, "cpu": info.get("cpu"), "family": cpuinfo.get("cpu family"),
            "model": cpuinfo.get("model"), "isa": info.get("isa_used"), "threads": info.get("threads"),
            "peak": info.get("peak"), "bandwidth_gbs": (info.get("memory_bandwidth") or {}).get("measured_gbs"),
            "cache": info.get("cache"), "machine": platform.machine()}


def isa_peak_scale(m, isa):
    """The FMA peak of `isa` over the best ISA's, both from cnnbench info's table in `m`: cnnbench's
    records divide by the best ISA's peak, and a run capped at `isa` is judged against its own (on a
    Zen 4, AVX2's equals AVX-512's; on an Intel part with two FMA units it is about half)."""
    peaks = {p["isa"]: p["gflops_all_threads"] for p in m.get("peak") or []}
    if isa not in peaks or not peaks:
        return 1.0
    return peaks[isa] / max(peaks.values())


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def conv_results(out, peak_scale=1.0):
    """side_by_side.py's convolution rows in `out`: compare.rows at its peak (the best of any round,
    which is the best ISA's), times `peak_scale` (see isa_peak_scale)."""
    peak = compare.best_peak(read_csv(os.path.join(out, "cnnbench_all.csv")))
    peak = peak * peak_scale if peak is not None else None
    rows = compare.rows(compare.load(os.path.join(out, "cnnbench.csv")),
                        compare.load(os.path.join(out, "pytorch.csv")), peak)
    return {"peak_gflops": peak, "rows": rows}


def step_results(out):
    """side_by_side.py --models' best totals in `out`, per (model, batch); a
    step either tool did not run ("status" other than ok) has no times and
    says why in "missing"."""
    ours = {(r["model"], r["batch"]): r for r in read_csv(os.path.join(out, "cnnbench.csv"))}
    peer = {(r["model"], r["batch"]): r for r in read_csv(os.path.join(out, "pytorch.csv"))}
    steps = []
    for k in dict.fromkeys(list(ours) + list(peer)):
        o, p = ours.get(k, {}), peer.get(k, {})
        status = {t: r.get("status", "ok") if r else "no row" for t, r in (("cnnbench", o), ("PyTorch", p))}
        step = {"model": k[0], "batch": int(k[1])}
        if any(v != "ok" for v in status.values()):
            steps.append({**step, "missing": ", ".join(f"{t}: {v}" for t, v in status.items())})
            continue
        om, pm = float(o["total_ms_median"]), float(p["total_ms_median"])
        steps.append({**step, "ms": om, "peer_ms": pm, "ratio": pm / om,
                      "fwd_ms": float(o["fwd_ms_median"]), "bwd_ms": float(o["bwd_ms_median"]),
                      "peer_fwd_ms": float(p["fwd_ms_median"]), "peer_bwd_ms": float(p["bwd_ms_median"])})
    return steps


def goals(conv=None, steps=None, rnn=None):
    """Issue 29's goals from the parts that ran: [{"goal", "measured", "met", "misses"}]."""
    out = []
    if steps is not None:
        for s in steps:
            goal = f"{s['model']} step at batch {s['batch']}, at least {STEP_RATIO:.2f}x PyTorch"
            if "missing" in s:
                out.append({"goal": goal, "measured": f"not measured ({s['missing']})", "met": False,
                            "misses": [f"not measured ({s['missing']})"]})
                continue
            met = s["ratio"] >= STEP_RATIO
            out.append({"goal": goal,
                        "measured": f"{s['ratio']:.2f}x: cnnbench {s['ms']:.0f} ms (forward {s['fwd_ms']:.0f}, "
                                    f"backward {s['bwd_ms']:.0f}), PyTorch {s['peer_ms']:.0f} ms "
                                    f"({s['peer_fwd_ms']:.0f}, {s['peer_bwd_ms']:.0f})",
                        "met": met, "misses": [] if met else [f"{s['ratio']:.2f}x"]})
    if conv is not None:
        rows = conv["rows"]
        summ = compare.summary(rows)
        dirs = [d for d in DIRS if d in summ]
        # A direction with no row in common (a tool failed it) is a miss, not a pass.
        absent = [f"{d}: no layer measured by both" for d in DIRS if d not in summ]
        layers = max((v["layers"] for v in summ.values()), default=0)
        out.append({"goal": f"convolutions, median at least {CONV_MEDIAN:.2f}x oneDNN per direction "
                            f"({layers} layers)",
                    "measured": ", ".join(f"{d} {summ[d]['median']:.2f}" for d in dirs) or "nothing",
                    "met": not absent and all(summ[d]["median"] >= CONV_MEDIAN for d in dirs),
                    "misses": [f"{d}: median {summ[d]['median']:.2f}" for d in dirs
                               if summ[d]["median"] < CONV_MEDIAN] + absent})
        low = [r for r in rows if r["ratio"] < CONV_FLOOR]
        out.append({"goal": f"no layer under {CONV_FLOOR:.1f}x",
                    "measured": "minima " + ", ".join(f"{d} {summ[d]['min']:.2f}" for d in dirs),
                    "met": not absent and not low,
                    "misses": [f"{r['name']} {r['dir']}: {r['ratio']:.2f}x ({r['algo']})" for r in low] + absent})
        slow = [r for r in rows if r["is_3x3"] and not r["pct"] >= CONV_3X3_PCT]
        out.append({"goal": f"3x3 layers at {CONV_3X3_PCT:.0f}% of the FMA peak or more, every direction "
                            f"(peak {conv['peak_gflops']:.1f} GFLOP/s)",
                    "measured": "minima " + ", ".join(f"{d} {summ[d]['min_3x3_pct']:.1f}%" for d in dirs),
                    "met": not absent and not slow,
                    "misses": [f"{r['name']} {r['dir']}: {r['pct']:.1f}% ({r['algo']})" for r in slow] + absent})
    if rnn is not None:
        for name, rows in rnn.items():
            behind = [(r["problem"], p, r["ratio"][p]) for r in rows for p in ("fwd", "bwd")
                      if r["ratio"][p] < RNN_FLOOR]
            lo = {p: min(r["ratio"][p] for r in rows) for p in ("fwd", "bwd")}
            out.append({"goal": f"LSTM and GRU at least {RNN_FLOOR:.1f}x PyTorch per problem: {name} "
                                f"({len(rows)} problem{'s' if len(rows) != 1 else ''})",
                        "measured": f"minima forward {lo['fwd']:.2f}x, backward {lo['bwd']:.2f}x; "
                                    f"{len(behind)} of {2 * len(rows)} passes behind",
                        "met": not behind,
                        "misses": [f"{prob} {p}: {x:.2f}x" for prob, p, x in behind]})
    return out


def render(m, command, table):
    peak = next((p for p in m["peak"] or [] if p["isa"] == m["isa"]), None)
    lines = [f"Issue 29's goals on {m['cpu']} (family {m['family']}, model {m['model']}), ISA {m['isa']}, "
             f"{m['threads']} thread(s)"
             + (f", FMA peak {peak['gflops_all_threads']:.0f} GFLOP/s" if peak else "")
             + (f", {m['bandwidth_gbs']:.1f} GB/s copy" if m["bandwidth_gbs"] else "")
             + f"; {m['cnnbench']}."
             + (" Both tools capped at it: " + ", ".join(f"{k}={v}" for k, v in m["isa_env"].items()) + "."
                if m.get("isa_env") else ""), "", f"`{command}`", "",
             "| goal (issue 29) | measured | met |", "|---|---|---|"]
    for g in table:
        lines.append(f"| {g['goal']} | {g['measured']} | {'yes' if g['met'] else '**no**'} |")
    misses = [g for g in table if g["misses"]]
    if misses:
        lines += ["", "Under the bar:"]
        for g in misses:
            lines.append(f"- {g['goal']}: " + "; ".join(g["misses"]))
    return "\n".join(lines) + "\n"


def run_step(cmd):
    sys.stderr.write("goal_table.py: " + " ".join(cmd) + "\n")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else os.cpu_count(), help="for both tools (default: the CPUs this process may run on)")
    ap.add_argument("--cnnbench", default=os.path.join(ROOT, "target", "release", "cnnbench"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--parts", default=",".join(PARTS), help="comma list of conv, step, rnn")
    ap.add_argument("--conv-from", default="builtin:resnet50")
    ap.add_argument("--conv-rounds", type=int, default=2)
    ap.add_argument("--model", default="resnet50:16")
    ap.add_argument("--step-rounds", type=int, default=3)
    ap.add_argument("--rnn-rounds", type=int, default=3)
    ap.add_argument("--rnn-iters", type=int, default=10)
    ap.add_argument("--small-rnn", default="builtin:small-rnn")
    ap.add_argument("--deepbench-only", default=r"-h(256|512)-",
                    help="DeepBench's training problems whose line matches this regex")
    ap.add_argument("--isa", choices=sorted(ISA_ENV),
                    help="cap both tools at this ISA (default: each tool's best here)")
    a = ap.parse_args(argv)
    parts = [p for p in a.parts.split(",") if p]
    if not parts or any(p not in PARTS for p in parts):
        ap.error(f"--parts takes a comma list of {', '.join(PARTS)}")
    for path, what in ((a.cnnbench, "--cnnbench"), (a.python, "--python")):
        if not os.path.exists(path):
            sys.exit(f"goal_table.py: error: {what} {path} does not exist "
                     "(cargo build --release -p cnnbench; scripts/peers/setup.sh)")
    os.makedirs(a.out, exist_ok=True)
    command = shlex.join(["python3", "scripts/peers/goal_table.py", *argv])
    m = machine(a.cnnbench, a.threads)
    if a.isa:
        os.environ.update(ISA_ENV[a.isa])
        m["isa"] = a.isa
        m["isa_env"] = ISA_ENV[a.isa]
    with open(os.path.join(a.out, "info.json"), "w") as f:
        json.dump(m, f, indent=1)
    common = ["--cnnbench", a.cnnbench, "--python", a.python, "--threads", str(a.threads)]
    sbs = [sys.executable, os.path.join(HERE, "side_by_side.py")]
    conv = steps = rnn = None
    if "conv" in parts:
        out = os.path.join(a.out, "conv")
        run_step(sbs + ["--out", out, "--from", a.conv_from, "--rounds", str(a.conv_rounds)] + common)
        conv = conv_results(out, isa_peak_scale(m, a.isa) if a.isa else 1.0)
    if "step" in parts:
        out = os.path.join(a.out, "step")
        run_step(sbs + ["--out", out, "--models", a.model, "--rounds", str(a.step_rounds)] + common)
        steps = step_results(out)
    if "rnn" in parts:
        rnn = {}
        for name, source, only, file in (("small problems", a.small_rnn, None, "rnn-small.md"),
                                         ("DeepBench", "builtin:deepbench-rnn", a.deepbench_only,
                                          "rnn-deepbench.md")):
            args = SimpleNamespace(source=source, only=only, threads=a.threads, rounds=a.rnn_rounds, warmup=1,
                                   iters=a.rnn_iters, cnnbench=a.cnnbench, python=a.python)
            # The goal is the LSTM's and GRU's: plain RNN lines are left out.
            lines = [l for l in side_by_side_rnn.select(source, only) if re.search(RNN_CELLS, l)]
            if not lines:
                sys.exit(f"goal_table.py: error: no LSTM or GRU problem of {source} matches {only!r}")
            sys.stderr.write(f"goal_table.py: {len(lines)} RNN problems of {source}\n")
            rows = side_by_side_rnn.run(args, lines)
            with open(os.path.join(a.out, file), "w") as f:
                f.write(side_by_side_rnn.render(args, rows))
            rnn[f"{name}, {file}"] = rows
    table = goals(conv, steps, rnn)
    with open(os.path.join(a.out, "goals.json"), "w") as f:
        json.dump({"machine": m, "command": command, "goals": table}, f, indent=1)
    md = render(m, command, table)
    with open(os.path.join(a.out, "goal_table.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main(sys.argv[1:])
