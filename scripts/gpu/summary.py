#!/usr/bin/env python3
"""Markdown summaries of scripts/gpu/verify.sh's logs.

    summary.py --part N LOGS       the summary of verify.sh part N (1, 2, 3, quick or
                                   paths: summary_paths.py)
                                   from its logs folder (steps.tsv, *.out,
                                   *.err, check/ and time/ JSON, models/ CSV)
    summary.py --per-layer DIR     the per-layer tables of the `cnnbench model`
                                   results-store files under DIR
    summary.py DIR                 the conv summary of a folder of `conv` /
                                   `gemm --format json` files: --check
                                   results, cnnbench's `auto` time against
                                   cuDNN's own FindEx time, the best algorithm
                                   per layer (files r50_*), GEMMs

Only the standard library; never fails on a missing or partial file (a step
that was skipped or cut short is reported as such).
"""
import csv
import glob
import io
import json
import os
import re
import statistics
import sys
from collections import Counter, OrderedDict



def err_key(e):
    """A relative error for sorting: null (JSON's NaN) above every number."""
    return float("inf") if e is None else float(e)


def fmt_err(e):
    return "NaN" if e is None else f"{float(e):.2e}"

def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def steps(logs):
    """steps.tsv: name -> (status, seconds, detail), in order."""
    out = OrderedDict()
    for line in read(os.path.join(logs, "steps.tsv")).splitlines():
        parts = line.split("\t") + ["", "", ""]
        out[parts[0]] = (parts[1], parts[2], parts[3])
    return out


def env_lines(logs):
    return [line.rstrip() for line in read(os.path.join(logs, "env.txt")).splitlines() if line.strip()]


def env_value(logs, key):
    for line in env_lines(logs):
        if line.startswith(key + " "):
            return line[len(key):].strip()
    return ""


def header(logs, title):
    lines = [f"# {title}", ""]
    st = steps(logs)
    gpu = st.get("gpu", ("", "", ""))
    keys = [("date", "date"), ("host", "host"), ("checkout", "checkout"), ("binary", "binary"),
            ("pack", "pack built from"), ("nvidia-smi", "nvidia-smi")]
    for key, label in keys:
        v = env_value(logs, key)
        if v:
            lines.append(f"- {label}: {v}")
    envsh = env_value(logs, "env.sh")
    lines.append(f"- libraries (env.sh): {envsh if envsh else 'all found'}; CUDA major "
                 f"{env_value(logs, 'cuda major') or '?'}; folders: `{env_value(logs, 'lib dirs') or '(none added)'}`")
    if gpu[0] == "ok":
        lines.append(f"- GPU: usable: {gpu[2]}")
    elif gpu[0]:
        lines.append(f"- GPU: **{gpu[0]}**: {gpu[2]}")
    lines.append("")
    return lines


def step_table(logs, label=lambda n: f"`{n}`", result=lambda n, s: s[0]):
    lines = ["| step | result | s |", "|---|---|---:|"]
    for name, s in steps(logs).items():
        lines.append(f"| {label(name)} | {result(name, s)} | {s[1]} |")
    return lines + [""]


def failed_steps(logs):
    return [(n, s[0]) for n, s in steps(logs).items() if not (s[0] == "ok" or s[0].startswith("skipped"))]


def skipped_steps(logs):
    return [(n, s[0]) for n, s in steps(logs).items() if s[0].startswith("skipped")]


def info_block(logs, lines=40):
    text = read(os.path.join(logs, "info.txt")).rstrip()
    if not text:
        return []
    body = text.splitlines()[:lines]
    return ["## `cnnbench info`", "", "```text", *body, "```", ""]


# --------------------------------------------------------------------------
# Part 1


def test_output(logs, name):
    """(result line, failed test names, {skip message: [tests]}) of a libtest run."""
    text = read(os.path.join(logs, name + ".out")) + read(os.path.join(logs, name + ".err"))
    results = re.findall(r"^test result: .*$", text, re.M)
    failed = []
    m = re.search(r"^failures:\n((?:    \S.*\n)+)", text, re.M)
    if m:
        failed = [line.strip() for line in m.group(1).splitlines()]
    skips = OrderedDict()
    printed = []
    current = None
    for line in text.splitlines():
        t = re.match(r"^test (\S+) \.\.\. ?(.*)$", line)
        if t:
            current = t.group(1)
            line = t.group(2)
        elif line.startswith("failures:"):
            current = None  # the captured output and the list of failures follow
            continue
        elif line.startswith(("running ", "test result:", "---- ")) or not current:
            continue
        found = re.findall(r"skipped: ([^\n]*)", line)
        for s in found:
            s = re.sub(r"\s+$", "", s)
            skips.setdefault(s, []).append(current or "?")
        if not found and line.strip() not in ("", "ok", "FAILED", "ignored"):
            printed.append((current, line.strip()))
    test_output.printed = printed
    return (results[-1] if results else "no result line"), failed, skips


def short_result(result):
    m = re.match(r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured; (\d+) filtered out",
                 result)
    if not m:
        return result
    s = f"{m.group(1)}: {m.group(2)} passed, {m.group(3)} failed"
    if m.group(4) != "0":
        s += f", {m.group(4)} ignored"
    if m.group(5) != "0":
        s += f" ({m.group(5)} filtered out)"
    return s


SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


def sanitizer_tool(name):
    """The compute-sanitizer tool a step NAME (TOOL_WHAT) ran, or None."""
    tool = name.split("_", 1)[0]
    return tool if tool in SANITIZER_TOOLS and "_" in name else None


def sanitizer_label(name):
    """A step TOOL_model / TOOL_conv_DTYPE_LAYOUT as words."""
    tool = sanitizer_tool(name)
    what = name[len(tool) + 1:]
    if what == "model":
        return f"{tool}: `model resnet18 --device gpu --batch 8 --warmup 0 --iters 1`"
    m = re.match(r"^conv_(\w+?)_(nhwc|nchw)$", what)
    if m:
        return (f"{tool}: `conv mb4ic32ih28oc64oh28kh3ph1 --dtype {m.group(1)} --layout {m.group(2)} "
                "--dir all --algo all --check`")
    return f"{tool}: `{what}`"


def sanitizer_result(logs, name):
    """(the last summary line, Counter of reported kinds) of a compute-sanitizer run.

    memcheck, initcheck and synccheck end with `ERROR SUMMARY: N errors`,
    racecheck with `RACECHECK SUMMARY: N hazards displayed (E errors, W
    warnings)`."""
    text = read(os.path.join(logs, name + ".out")) + read(os.path.join(logs, name + ".err"))
    summary = re.findall(r"=+ (?:ERROR|RACECHECK) SUMMARY: .*", text)
    kinds = Counter()
    for line in text.splitlines():
        m = re.match(r"^=+ (Invalid .*?|Program hit .*?|Uninitialized .*?|Leaked .*?|.*error.*?)( at |$)", line)
        if m and "SUMMARY" not in line:
            kinds[re.sub(r"0x[0-9a-f]+", "0x…", m.group(1))] += 1
    return (summary[-1].lstrip("= ") if summary else None), kinds


def nccl_section(logs):
    """The all-reduce table and the data-parallel records of part 1."""
    return allreduce_table(logs) + dp_table(logs)


def allreduce_records(logs):
    ar = load_json(os.path.join(logs, "dp", "allreduce.json"))
    return ar["records"] if isinstance(ar, dict) and isinstance(ar.get("records"), list) else []


def allreduce_table(logs):
    lines = []
    ar = load_json(os.path.join(logs, "dp", "allreduce.json"))
    if isinstance(ar, dict) and ar.get("records"):
        lines += ["## NCCL all-reduce (`cnnbench allreduce --iters 20`)", "",
                  "| elements | dtype | place | ranks | time us (median, min-max) | algbw GB/s | busbw GB/s | status |",
                  "|---:|---|---|---:|---:|---:|---:|---|"]
        for r in ar["records"]:
            t = r["time_us"]
            lines.append(f"| {r['elements']} | {r['dtype']} | {'in' if r['in_place'] else 'out'} | {r['ranks']} "
                         f"| {t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f}) | {r['algbw_gbps']:.1f} "
                         f"| {r['busbw_gbps']:.1f} | {r['status']} |")
        lines.append("")
    return lines


def dp_table(logs):
    lines, rows = [], []
    for name in ("resnet50-gpus1.json", "resnet18-launched.json"):
        doc = load_json(os.path.join(logs, "dp", name))
        for r in (doc or {}).get("records", []) if isinstance(doc, dict) else []:
            dp = r.get("data_parallel")
            tot = (r.get("total_ms") or {}).get("median")
            if dp:
                rows.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {dp['launcher']} x{dp['gpus']} "
                            f"| {dp['single_gpu_step_ms']:.2f} | {tot:.2f} | {dp['exposed_comm_ms']['median']:.3f} "
                            f"| {dp['buckets']} | {dp['efficiency']:.3f} |")
    if rows:
        lines += ["## Data-parallel step beside the plain single-GPU step (same run)", "",
                  "| model | batch/GPU | dtype | replicas | plain step ms | data-parallel step ms | exposed comm ms "
                  "| buckets | efficiency |", "|---|---:|---|---|---:|---:|---:|---:|---:|"] + rows + [""]
    return lines


def part1(logs):
    lines = header(logs, "cnnbench GPU verification, part 1: info, GPU tests, compute-sanitizer")
    st = steps(logs)
    gpu_ok = st.get("gpu", ("",))[0] == "ok"
    labels = {
        "info": "`cnnbench info`",
        "info_json": "`cnnbench info --format json`",
        "tests_gpu": "GPU tests: `cnnbench_layers backend_tests real_libs cuda_programs backend::cuda ::cuda "
                     "net::gpu --test-threads=1`" + (" with `CNNBENCH_GPU_LIBS=required CNNBENCH_GPU=required`"
                                                     if gpu_ok else
                                                     " (without the `=required` variables: no GPU)"),
        "allreduce": "NCCL: `allreduce --iters 20 --dtype f32,bf16` over the GPUs here",
        "dp_gpus1": "NCCL: `model resnet50 --gpus 1 --batch 64 --dtype f16 --iters 30 --per-layer`",
        "dp_launched": "NCCL: `model resnet18 --launcher torchrun` as rank 0 of 1",
    }
    all_skips = OrderedDict()
    test_fail = []
    notes = []
    san = {}

    def result(name, s):
        status = s[0]
        if name.startswith("tests_"):
            res, failed, skips = test_output(logs, name)
            for msg, tests in skips.items():
                all_skips.setdefault(msg, []).extend(f"{name}: {t}" for t in tests)
            test_fail.extend(f"{name}: {t}" for t in failed)
            if name == "tests_gpu":
                notes.extend(test_output.printed)
            text = short_result(res)
            n_skip = sum(len(v) for v in skips.values())
            if n_skip:
                text += f"; {n_skip} case(s) printed `skipped:`"
            if failed:
                text += "; FAILED: " + ", ".join(failed[:6])
            return text if status == "ok" else f"**{status}**: {text}"
        if sanitizer_tool(name):
            if status.startswith("skipped"):
                return status
            summ, kinds = sanitizer_result(logs, name)
            san[name] = (summ, kinds)
            text = summ or "no ERROR SUMMARY line"
            return text if status == "ok" else f"**{status}**: {text}"
        return status if status in ("ok",) or status.startswith("skipped") else f"**{status}**"

    def label(name):
        if name in labels:
            return labels[name]
        if name.startswith("tests_all_"):
            return f"all tests of `{name[len('tests_all_'):]}`"
        if sanitizer_tool(name):
            return sanitizer_label(name)
        return f"`{name}`"

    lines += step_table(logs, label, result)
    if notes:
        lines += ["## What the GPU tests printed", ""]
        lines += [f"- `{t}`: {line}" for t, line in notes[:12]]
        lines.append("")
    if all_skips:
        lines += ["## Skipped test cases", ""]
        for msg, tests in all_skips.items():
            lines.append(f"- `skipped: {msg}` ({len(tests)}): " + ", ".join(f"`{t}`" for t in tests[:8])
                         + (" ..." if len(tests) > 8 else ""))
        lines.append("")
    kinds_all = [(n, k) for n, (s, k) in san.items() if k]
    if kinds_all:
        lines += ["## compute-sanitizer reports", ""]
        for n, kinds in kinds_all:
            for kind, count in kinds.most_common(8):
                lines.append(f"- {n}: {count} x {kind}")
        lines.append("")
    lines += nccl_section(logs)
    lines += info_block(logs)

    fails = failed_steps(logs)
    lines += ["## Closing note", ""]
    if gpu_ok:
        gpu_name = st["gpu"][2]
        if not fails:
            lines.append(f"Part 1 passed on {gpu_name}: every GPU test ran with `CNNBENCH_GPU_LIBS=required` "
                         "and `CNNBENCH_GPU=required`"
                         + (" (some printed `skipped:`, listed above)" if all_skips else "")
                         + ", and compute-sanitizer (default options) reported: "
                         + "; ".join(f"{n}: {s or 'no summary'}" for n, (s, _) in san.items()) + ".")
        else:
            lines.append(f"Part 1 on {gpu_name}: {len(fails)} step(s) failed: "
                         + ", ".join(f"{n} ({s})" for n, s in fails) + ".")
        if any("no GPU" in m for m in all_skips):
            lines.append("")
            lines.append("**Note:** some GPU test cases printed `skipped: no GPU` although `cnnbench info` "
                         "found a usable GPU and `CNNBENCH_GPU=required` was set; see the skipped cases above.")
    else:
        why = st.get("gpu", ("", "", ""))
        lines.append(f"No GPU was usable here ({why[2] or why[0]}): the GPU test cases ran without "
                     "`CNNBENCH_GPU_LIBS=required` and `CNNBENCH_GPU=required` and reported `skipped: no GPU`, and the compute-sanitizer "
                     "steps were skipped. What ran is the CPU side"
                     + (" (with the real-library tests against the libraries env.sh found, printed above)"
                        if notes else "") + ": "
                     + ("every test that ran passed." if not fails else
                        f"{len(fails)} step(s) failed: " + ", ".join(f"{n} ({s})" for n, s in fails) + "."))
    if test_fail:
        lines.append("")
        lines.append("Failed tests: " + ", ".join(f"`{t}`" for t in test_fail) + ".")
    return lines


# --------------------------------------------------------------------------
# Conv and GEMM JSON (part 2, and the folder mode)


def conv_rows(folder, prefix=""):
    rows, skipped = [], []
    for path in sorted(glob.glob(os.path.join(folder, prefix + "*.json"))):
        if os.path.basename(path) == "info.json":
            continue
        doc = load_json(path)
        if doc is None:
            continue
        for r in doc.get("records", []):
            r["file"] = os.path.basename(path)
            rows.append(r)
        for s in doc.get("skipped", []) or []:
            s["file"] = os.path.basename(path)
            skipped.append(s)
    return rows, skipped


def fmt_ms(v):
    return f"{v:.4f}" if v < 10 else f"{v:.2f}"


def check_section(rows, skipped, title):
    lines = [f"## {title}", ""]
    checked = [r for r in rows if r.get("check")]
    failed = [r for r in checked if not r["check"].get("passed")]
    lines.append(f"- records: {len(rows)}; checked: {len(checked)}; failed: {len(failed)}; "
                 f"not timed (not supported, out of memory or over the workspace limit): {len(skipped)}")
    for r in failed[:30]:
        lines.append(f"  - FAILED {r['file']}: {r['problem']} {r['dir']} {r['dtype']} {r['layout']} "
                     f"{r['algo']} rel err {r['check'].get('rel_err')}")
    if checked:
        lines += ["", "| file | records | checked | failed | worst rel err (problem, dir, algo) |",
                  "|---|---:|---:|---:|---|"]
        by_file = OrderedDict()
        for r in rows:
            by_file.setdefault(r["file"], []).append(r)
        for f, rs in by_file.items():
            ch = [r for r in rs if r.get("check")]
            bad = [r for r in ch if not r["check"].get("passed")]
            worst = max(ch, key=lambda r: err_key(r["check"].get("rel_err")), default=None)
            w = (f"{fmt_err(worst['check'].get('rel_err'))} ({worst['problem']}, {worst['dir']}, {worst['algo']})"
                 if worst else "-")
            lines.append(f"| {f} | {len(rs)} | {len(ch)} | {len(bad)} | {w} |")
    statuses = Counter(s.get("status", "?") for s in skipped)
    if statuses:
        lines.append("")
        lines.append("Not timed, by status: " + "; ".join(f"{k}: {v}" for k, v in statuses.most_common()))
    return lines + [""]


def findex_section(rows):
    pairs = [(r["ms"]["median"] / r["cudnn_find_ms"], r["ms"]["min"] / r["cudnn_find_ms"], r)
             for r in rows if r.get("cudnn_find_ms")]
    if not pairs:
        return []
    med = [p[0] for p in pairs]
    mins = [p[1] for p in pairs]
    over = [p for p in pairs if p[0] > 1.03]
    lines = [f"## `--algo auto` against cuDNN's FindEx ({len(pairs)} layer-directions)", "",
             f"- cnnbench median / FindEx time: median {statistics.median(med):.3f}, max {max(med):.3f}; "
             f"over 1.03: {len(over)}",
             f"- cnnbench min / FindEx time: median {statistics.median(mins):.3f}, max {max(mins):.3f}"]
    for ratio, _, r in sorted(over, key=lambda p: -p[0])[:10]:
        lines.append(f"  - {ratio:.3f} {r['problem']} {r['dir']} {r['dtype']} {r['layout']} {r['algo']} "
                     f"({r['ms']['median']:.4f} ms vs {r['cudnn_find_ms']:.4f} ms)")
    return lines + [""]


def r50_totals(rows):
    """Per dtype x layout: the sum over the layer-directions of the median, and the TFLOP/s of that sum."""
    r50 = [r for r in rows if r["file"].startswith("r50_")]
    if not r50:
        return []
    groups = OrderedDict()
    for r in r50:
        groups.setdefault((r["dtype"], r["layout"]), []).append(r)
    lines = ["## builtin:resnet50 at batch 16, `--algo auto`: totals", "",
             "| dtype | layout | layer-directions | sum of medians ms | TFLOP/s over the sum | best algorithms (most chosen) |",
             "|---|---|---:|---:|---:|---|"]
    for (dt, lay), rs in groups.items():
        ms = sum(r["ms"]["median"] for r in rs)
        flop = sum(r["gflops"] * r["ms"]["median"] * 1e-3 for r in rs)  # GFLOP
        algos = Counter(r["algo"] for r in rs).most_common(3)
        lines.append(f"| {dt} | {lay} | {len(rs)} | {ms:.2f} | {flop / ms:.1f} | "
                     + ", ".join(f"{a} ({n})" for a, n in algos) + " |")
    return lines + [""]


def r50_table(rows):
    r50 = [r for r in rows if r["file"].startswith("r50_")]
    if not r50:
        return []
    lines = ["## builtin:resnet50 (auto): best algorithm per layer", "",
             "| layer | dir | dtype | layout | algorithm | ms | TFLOP/s | % peak |",
             "|---|---|---|---|---|---:|---:|---:|"]
    for r in r50:
        pf = r.get("peak_fraction")
        lines.append(f"| {r['problem']} | {r['dir']} | {r['dtype']} | {r['layout']} | {r['algo']} | "
                     f"{r['ms']['median']:.4f} | {r['gflops'] / 1e3:.1f} | "
                     f"{'-' if pf is None else f'{pf * 100:.1f}'} |")
    return lines + [""]


def algo_all_section(rows, skipped):
    rs = [r for r in rows if r["file"].startswith("all_")]
    if not rs:
        return []
    lines = ["## `--algo all` (batch 16, alone on the GPU)", "",
             "| problem | dir | dtype | timed | fastest | ms | slowest | ms | not timed |",
             "|---|---|---|---:|---|---:|---|---:|---:|"]
    groups = OrderedDict()
    for r in rs:
        groups.setdefault((r["problem"], r["dir"], r["dtype"]), []).append(r)
    sk = Counter((s.get("problem"), s.get("dir"), s.get("dtype")) for s in skipped
                 if s.get("file", "").startswith("all_"))
    for (p, d, dt), g in groups.items():
        g = sorted(g, key=lambda r: r["ms"]["median"])
        lines.append(f"| {p} | {d} | {dt} | {len(g)} | {g[0]['algo']} | {fmt_ms(g[0]['ms']['median'])} | "
                     f"{g[-1]['algo']} | {fmt_ms(g[-1]['ms']['median'])} | {sk.get((p, d, dt), 0)} |")
    return lines + [""]


def gemm_section(rows, title):
    rs = [r for r in rows if r.get("dir") == "gemm"]
    if not rs:
        return []
    lines = [f"## {title}", "", "| problem | dtype | algo | median ms | TFLOP/s | % peak | check |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in rs:
        pf = r.get("peak_fraction")
        c = r.get("check")
        cs = "-" if not c else f"{'ok' if c.get('passed') else 'FAIL'} ({fmt_err(c.get('rel_err'))})"
        lines.append(f"| {r['problem']} | {r['dtype']} | {r['algo']} | {fmt_ms(r['ms']['median'])} | "
                     f"{r['gflops'] / 1e3:.1f} | {'-' if pf is None else f'{pf * 100:.1f}'} | {cs} |")
    return lines + [""]


def folder_summary(folder):
    rows, skipped = conv_rows(folder)
    lines = [f"# GPU conv summary ({folder})", ""]
    lines += check_section(rows, skipped, "--check")
    lines += findex_section(rows)
    lines += gemm_section(rows, "GEMMs")
    lines += r50_table(rows)
    return lines


def part2(logs):
    lines = header(logs, "cnnbench GPU verification, part 2: convolutions and GEMMs")
    lines += step_table(logs)
    crow, cskip = conv_rows(os.path.join(logs, "check"))
    trow, tskip = conv_rows(os.path.join(logs, "time"))
    batch = re.search(r"--batch (\d+)", read(os.path.join(logs, "r50check_f32_nhwc.cmd")))
    lines += check_section(crow, cskip, "`--check` runs (side by side, builtin:resnet50 at batch "
                           f"{batch.group(1) if batch else '?'} instead of 16, odd.txt, `--algo all` on two "
                           "layers, GEMMs; their GPU times are not timings)")
    lines += gemm_section(crow, "GEMMs checked")
    lines += findex_section([r for r in trow if r["file"].startswith("r50_")])
    lines += r50_totals(trow)
    lines += algo_all_section(trow, tskip)
    lines += gemm_section(trow, "GEMMs timed (alone, not checked)")
    if trow:
        lines.append("The best algorithm of every resnet50 layer, direction, dtype and layout is in "
                     "`part2-r50-algos.md` (also in the logs).")
        lines.append("")
    fails = failed_steps(logs)
    skips = skipped_steps(logs)
    checked = [r for r in crow if r.get("check")]
    bad = [r for r in checked if not r["check"].get("passed")]
    lines += ["## Closing note", ""]
    gpu = steps(logs).get("gpu", ("", "", ""))
    if gpu[0] != "ok":
        lines.append(f"Nothing ran: no usable GPU ({gpu[2] or gpu[0]}).")
        return lines
    text = (f"Part 2 on {gpu[2]}: {len(checked)} checked records, {len(bad)} failed"
            f"; {len(trow)} timed records.")
    if fails:
        text += " Steps that failed: " + ", ".join(f"{n} ({s})" for n, s in fails) + "."
    if skips:
        text += " Skipped: " + ", ".join(f"{n} ({s})" for n, s in skips) + "."
    if not checked:
        text += " **No checked records**: the check runs produced no JSON."
    elif not fails and not skips and not bad:
        text += " Every step passed."
    lines.append(text)
    return lines


def part2_algos(logs):
    trow, _ = conv_rows(os.path.join(logs, "time"))
    return ["# builtin:resnet50 at batch 16: best algorithm per layer (verify.sh part 2)", ""] + r50_table(trow)


# --------------------------------------------------------------------------
# Part 3


def check_models(logs):
    """[(dtype, process label, JSON or None, models started, stderr)] of part 3's check runs."""
    out = []
    order = {"f32": 0, "tf32": 1, "f16": 2, "bf16": 3}
    for path in glob.glob(os.path.join(logs, "check_*.out")):
        m = re.match(r"^check_(\w+?)(?:_(\w+))?\.out$", os.path.basename(path))
        if not m:
            continue
        err = read(path[:-4] + ".err")
        out.append((m.group(1), m.group(2) or "", load_json(path), re.findall(r"checking (\S+) at batch", err),
                    err))
    return sorted(out, key=lambda x: (order.get(x[0], 9), x[1]))


def part3_check(logs):
    st = steps(logs)
    res = check_models(logs)
    if not res:
        return []
    lines = ["## `check --device gpu --batch 2` (GPU against the CPU's fast layers, NHWC)", "",
             "| dtype | model | loss | worst layer output | worst gradient | tensors | result |",
             "|---|---|---:|---|---|---:|---|"]
    notes = []
    for dt, label, data, started, err in res:
        name = f"check_{dt}" + (f"_{label}" if label else "")
        status = st.get(name, ("?",))[0]
        if data is None:
            last = err.strip().splitlines()[-1] if err.strip() else ""
            notes.append(f"- {name}: {status}; no JSON (cut short, or failed before printing); models started: "
                         f"{', '.join(started) or 'none'}" + (f"; last stderr line: `{last}`" if last else ""))
            continue
        models = OrderedDict()
        for c in data:
            models.setdefault(c["model"], []).append(c)
        for m, cs in models.items():
            loss = cs[0]
            outs = [c for c in cs if c["tensor"].endswith(".output")]
            grads = [c for c in cs if c["tensor"].endswith(".grad")]
            # A NaN error is written as null: it sorts above every number.
            wo = max(outs, key=lambda c: err_key(c["rel_err"]), default=None)
            wg = max(grads, key=lambda c: err_key(c["rel_err"]), default=None)
            bad = [c for c in cs if not c["passed"]]
            f = lambda c: "-" if c is None else f"{fmt_err(c['rel_err'])} ({c['tensor']})"  # noqa: E731
            lines.append(f"| {dt} | {m} | {fmt_err(loss['rel_err'])} | {f(wo)} | {f(wg)} | {len(cs)} | "
                         f"{'pass' if not bad else f'FAIL ({len(bad)})'} (tol {cs[0]['tolerance']:g}) |")
        missing = [m for m in started if m not in models]
        if missing:
            notes.append(f"- {name}: started but not reported: {', '.join(missing)}")
        if status != "ok":
            notes.append(f"- {name}: {status}")
    return lines + [""] + notes + ([""] if notes else [])


def model_csvs(logs):
    rows = {}
    for path in sorted(glob.glob(os.path.join(logs, "models", "*.csv"))):
        base = os.path.basename(path)[:-4]
        m = re.match(r"^(cn|pt)_(.+)_(\d+)_(\w+?)_([12])$", base)
        if not m:
            continue
        tool, model, batch, dtype, rnd = m.groups()
        try:
            with open(path) as f:
                for r in csv.DictReader(f):
                    if r.get("status") == "ok" and r.get("total_ms_median"):
                        rows.setdefault((model, int(batch), dtype), {}).setdefault(tool, {})[int(rnd)] = (
                            float(r["total_ms_median"]), r.get("images_per_sec", ""), r.get("device", ""))
                    elif r.get("status"):
                        rows.setdefault((model, int(batch), dtype), {}).setdefault(tool, {})[int(rnd)] = (
                            None, r.get("status"), r.get("device", ""))
        except (OSError, csv.Error):
            continue
    return rows


def part3_models(logs):
    rows = model_csvs(logs)
    if not rows:
        return []
    lines = ["## Training steps beside PyTorch (NHWC, ABBA: cnnbench, PyTorch, PyTorch, cnnbench)", "",
             "Median step (forward + backward) in ms of each run's 20 timed steps after 3 warm-up steps; "
             "then the median of the two rounds; ratio < 1: cnnbench faster.", "",
             "| model | batch | dtype | cnnbench r1 / r2 | PyTorch r1 / r2 | cnnbench median | PyTorch median | "
             "cnnbench / PyTorch |", "|---|---:|---|---:|---:|---:|---:|---:|"]
    devices = set()

    def cell(d):
        parts = []
        for rnd in (1, 2):
            v = d.get(rnd)
            parts.append("n/a" if v is None else (f"{v[0]:.2f}" if v[0] is not None else v[1]))
        return " / ".join(parts)

    def med(d):
        v = [x[0] for x in d.values() if x[0] is not None]
        return statistics.median(v) if v else None

    for (m, b, dt), t in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        c, p = t.get("cn", {}), t.get("pt", {})
        for d in (c, p):
            for v in d.values():
                devices.add(v[2])
        mc, mp = med(c), med(p)
        ratio = f"{mc / mp:.2f}" if mc and mp else "n/a"
        lines.append(f"| {m} | {b} | {dt} | {cell(c)} | {cell(p)} | "
                     f"{'n/a' if mc is None else f'{mc:.2f}'} | {'n/a' if mp is None else f'{mp:.2f}'} | {ratio} |")
    lines.append("")
    if devices:
        lines.append("Devices: " + "; ".join(sorted(d for d in devices if d)))
        lines.append("")
    for path in sorted(glob.glob(os.path.join(logs, "pt_*.err")))[:1]:
        first = read(path).splitlines()[:1]
        if first and first[0].startswith("torch "):
            lines += [f"PyTorch: {first[0]}", ""]
    lines += ["cnnbench times each phase with CUDA events on its stream (GPU time); pytorch_model.py times "
              "each phase on the host clock between `torch.cuda.synchronize()` calls, so its times also "
              "hold any launch gap the GPU waits through.", ""]
    return lines


def per_layer_runs(folder):
    """(round or None, record) of every model record with layers in the results store."""
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
        doc = load_json(path)
        if not doc or doc.get("subcommand") not in (None, "model"):
            continue
        rnd = re.search(r"_([12])\.csv", doc.get("environment", {}).get("command", ""))
        for r in doc.get("records", []):
            if r.get("layers"):
                runs.append((rnd.group(1) if rnd else None, r))
    return runs


def roof_cells(lay):
    """fwd/bwd GB/s and roofline places of a layer row (`--per-layer` records since the roofline),
    '-' where a pass moved nothing or the record has none."""
    cells = []
    roof = lay.get("roofline") or {}
    for d in ("forward", "backward"):
        p = roof.get(d) or {}
        gbs, pct, bound = p.get("gbs"), p.get("percent"), p.get("bound")
        cells.append((f"{gbs:,.0f}" if gbs >= 10 else f"{gbs:.1f}") if isinstance(gbs, (int, float)) else "-")
        cells.append(f"{pct:.0f}% {'BW' if bound == 'memory' else 'peak'}"
                     if isinstance(pct, (int, float)) else "-")
    return cells


def per_layer_md(rnd, r, limit=None, title=""):
    layers = r["layers"]
    med = lambda k: (r.get(k) or {}).get("median")
    roof = any(l.get("roofline") for l in layers)
    step = ", ".join(f"{n} {fmt_opt_ms(med(k))}" for n, k in (("forward", "forward_ms"), ("backward", "backward_ms")))
    lines = [f"## {title}{r.get('model')} batch {r.get('batch')} {r.get('dtype')} {r.get('layout')} on "
             f"{r.get('device')}" + (f", round {rnd}" if rnd else ""), "",
             f"step {fmt_opt_ms(med('total_ms'))} ms (median), {step}", ""]
    if r.get("gpu_paths"):
        lines += [f"GPU paths: {r['gpu_paths']}", ""]
    if roof:
        lines += ["| layer | type | output | fwd ms | bwd ms | % of step | fwd GB/s | fwd roof | bwd GB/s | "
                  "bwd roof | algorithms |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    else:
        lines += ["| layer | type | output | fwd ms | bwd ms | % of step | algorithms |",
                  "|---|---|---|---:|---:|---:|---|"]
    rows = layers if limit is None else sorted(layers, key=lambda l: -(l.get("percent") or 0))[:limit]
    for lay in rows:
        extra = "".join(f"{c} | " for c in roof_cells(lay)) if roof else ""
        lines.append(f"| {lay.get('name')} | {lay.get('kind')} | {lay.get('output')} | "
                     f"{lay.get('forward_ms') or 0:.3f} | {lay.get('backward_ms') or 0:.3f} | "
                     f"{lay.get('percent') or 0:.1f} | {extra}{lay.get('kernels') or ''} |")
    return lines + [""]


def per_layer(folder):
    lines = []
    for rnd, r in per_layer_runs(folder):
        lines += per_layer_md(rnd, r)
    return lines


def part3(logs):
    lines = header(logs, "cnnbench GPU verification, part 3: whole models")
    torch = read(os.path.join(logs, "torch.txt")).strip().splitlines()
    if torch:
        lines.insert(-1, f"- PyTorch: {torch[-1]}")
    lines += step_table(logs)
    lines += part3_check(logs)
    lines += part3_models(logs)
    # The largest batch's f16 run, round 2, else the nearest: its ten costliest layers.
    runs = per_layer_runs(os.path.join(logs, "results"))
    if runs:
        rnd, r = max(runs, key=lambda x: (x[1].get("dtype") == "f16", x[1].get("batch") or 0, x[0] == "2"))
        lines += per_layer_md(rnd, r, limit=10, title="Ten costliest layers: ")
        lines.append("Every run's full per-layer table is in `part3-per-layer.md` (and the results store "
                     "files in the logs).")
        lines.append("")
    st = steps(logs)
    skips = [(n, s) for n, s in skipped_steps(logs)]
    fails = failed_steps(logs)
    groups = [re.sub(r"^group_\S+?_(\d+)_(\w+)$", r"\1:\2", n) for n, _ in skips if n.startswith("group_")]
    lines += ["## Closing note", ""]
    gpu = st.get("gpu", ("", "", ""))
    if gpu[0] != "ok":
        lines.append(f"Nothing ran: no usable GPU ({gpu[2] or gpu[0]}).")
        return lines
    text = f"Part 3 on {gpu[2]}."
    if fails:
        text += " Steps that failed or were cut: " + ", ".join(f"{n} ({s})" for n, s in fails) + "."
    if skips:
        text += " Skipped: " + ", ".join(f"{n} ({s})" for n, s in skips[:12]) + (" ..." if len(skips) > 12 else "")
        text += "."
    if groups:
        text += (f" To run the skipped groups: `SKIP_CHECK=1 MODEL_GROUPS=\"{' '.join(groups)}\" "
                 "scripts/gpu/verify.sh 3 OUT`.")
    if not fails and not skips:
        text += " Every step ran and passed."
    lines.append(text)
    return lines


# --------------------------------------------------------------------------
# Recurrent layers beside PyTorch (part 4's summary and quick)


def rnn_key(problem):
    """A problem's DeepBench name (deepbench-lstm-h512-mb16-t25), else its words."""
    m = re.search(r"(deepbench-[A-Za-z0-9-]+)", problem)
    return m.group(1) if m else " ".join(problem.replace('"', "").split())


def rnn_cn_times(path):
    """{problem: {"fwd": ms, "bwd": ms}} of a `cnnbench rnn --format json` file (bwd: data + weights)."""
    doc = load_json(path)
    out = {}
    for r in (doc or {}).get("records", []) if isinstance(doc, dict) else []:
        try:
            out.setdefault(rnn_key(r["problem"]), {})[r["dir"]] = float(r["ms"]["median"])
        except (KeyError, TypeError, ValueError):
            continue
    res = {}
    for k, d in out.items():
        if "fwd" in d and "bwd-data" in d and "bwd-weights" in d:
            res[k] = {"fwd": d["fwd"], "bwd": d["bwd-data"] + d["bwd-weights"]}
    return res


def rnn_pt_times(path):
    """{problem: {"fwd": ms, "bwd": ms}} of scripts/peers/pytorch_rnn.py's CSV."""
    res = {}
    try:
        for r in csv.DictReader(io.StringIO(read(path))):
            try:
                res.setdefault(rnn_key(r["problem"]), {})[r["pass"]] = float(r["ms_median"])
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
    except csv.Error:
        pass
    return {k: d for k, d in res.items() if "fwd" in d and "bwd" in d}


def median_or_none(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


# --------------------------------------------------------------------------
# quick (verify.sh quick)

QUICK_ORDER = {"f16": 0, "bf16": 1, "tf32": 2, "f32": 3}


def abba_runs(logs):
    """{(model, batch, dtype, layout): {"cn"|"pt": {round: total ms or None}}} from the CSV that
    each `cn_*_R` / `pt_*_R` step printed (cnnbench model --format csv, pytorch_model.py), in the
    steps' order; a row whose status is not ok counts as None."""
    out = OrderedDict()
    for name in steps(logs):
        m = re.match(r"^(cn|pt)_(.+)_([12])$", name)
        if not m:
            continue
        tool, rnd = m.group(1), int(m.group(3))
        for r, ms in step_totals(logs, name):
            try:
                key = (r["model"], int(r["batch"]), r["dtype"], r["layout"])
            except (KeyError, TypeError, ValueError):
                continue
            out.setdefault(key, {}).setdefault(tool, {})[rnd] = ms
    return out


def step_totals(logs, name):
    """(row, median step ms or None) of each CSV row step `name` printed (cnnbench model --format
    csv, pytorch_model.py); a row whose status is not ok has None."""
    try:
        rows = list(csv.DictReader(io.StringIO(read(os.path.join(logs, name + ".out")))))
    except csv.Error:
        return []
    out = []
    for r in rows:
        try:
            ms = float(r["total_ms_median"]) if r.get("status") == "ok" else None
        except (KeyError, TypeError, ValueError):
            ms = None
        out.append((r, ms))
    return out


def fmt_ratio(v):
    return "n/a" if v is None else f"{v:.2f}"


def fmt_opt_ms(v):
    return "n/a" if v is None else fmt_ms(v)


def rounds_text(d):
    return ", ".join("n/a" if d.get(r) is None else fmt_ms(d[r]) for r in sorted(d)) or "n/a"


def quick_label(name):
    fixed = {
        "info": "`cnnbench info`",
        "info_json": "`cnnbench info --format json`",
        "gpu": "a usable GPU",
        "tests_gpu": "GPU tests: `cnnbench_layers backend_tests real_libs cuda_programs backend::cuda ::cuda "
                     "net::gpu --test-threads=2`, `CNNBENCH_GPU_LIBS=required CNNBENCH_GPU=required`",
        "check_bf16": "`check --device gpu --batch 2 --dtype bf16 --layout nhwc`: resnet50, alexnet, googlenet",
        "allreduce": "`allreduce --iters 20 --dtype f32,bf16`",
        "dp_gpus1": "`model resnet50 --gpus 1 --batch 64 --dtype f16` (and the plain step)",
        "per_layer": "`model resnet50 --per-layer --batch 256 --dtype f16` (--iters 10)",
        "deepbench_lstm_f16": "DeepBench LSTM, f16, ABBA",
        "keras_128_f32": "the Keras models, batch 128, f32, ABBA",
        "compare_model": "`compare --cudnn PIP --cudnn SYSTEM -- model resnet50 --dtype f16 --batch 256 --iters 10`",
        "compare_conv": "`compare --cudnn PIP --cudnn SYSTEM -- conv` five resnet50 layers, f16 NHWC, batch 256",
    }
    if name in fixed:
        return fixed[name]
    if sanitizer_tool(name):
        return sanitizer_label(name)
    m = re.match(r"^conv_check_(\w+?)_(nhwc|nchw)$", name)
    if m:
        return f"`conv --from builtin:resnet50 --batch 2 --check`, {m.group(1)} {m.group(2).upper()}"
    m = re.match(r"^(cn|pt)_resnet50_(\d+)_(\w+)_([12])$", name)
    if m:
        tool = "cnnbench `model`" if m.group(1) == "cn" else "`pytorch_model.py`"
        return f"{tool} resnet50, batch {m.group(2)}, {m.group(3)}, round {m.group(4)}"
    m = re.match(r"^group_resnet50_(\d+)_(\w+)$", name)
    if m:
        return f"ResNet-50 beside PyTorch, batch {m.group(1)}, {m.group(2)}"
    m = re.match(r"^rnn_(cn|pt)_(\w+)_([12])$", name)
    if m:
        tool = "cnnbench `rnn --algo standard --dir all`" if m.group(1) == "cn" else "`pytorch_rnn.py`"
        return f"{tool}, DeepBench LSTM, {m.group(2)}, round {m.group(3)}"
    m = re.match(r"^(cn|pt)_keras_(\d+)_(\w+)_([12])$", name)
    if m:
        tool = "cnnbench `model`" if m.group(1) == "cn" else "`pytorch_model.py`"
        return f"{tool}, the six Keras models, batch {m.group(2)}, {m.group(3)}, round {m.group(4)}"
    return f"`{name}`"


def quick_result(logs, name, s):
    status = s[0]
    bad = not (status == "ok" or status.startswith("skipped"))
    if name == "tests_gpu" and not status.startswith("skipped"):
        res, failed, _ = test_output(logs, name)
        text = short_result(res) + ("; FAILED: " + ", ".join(f"`{t}`" for t in failed[:6]) if failed else "")
        return f"**{status}**: {text}" if bad else text
    if sanitizer_tool(name) and not status.startswith("skipped"):
        summ, _ = sanitizer_result(logs, name)
        text = summ or "no summary line"
        return f"**{status}**: {text}" if bad else text
    return f"**{status}**" if bad else status


def quick_libraries(logs):
    """What cnnbench loaded: info's lines about libraries, the files and versions info.json names,
    and the GPU environment of a GPU run's record."""
    lines = []
    text = read(os.path.join(logs, "info.txt"))
    pick = [l.rstrip() for l in text.splitlines()
            if l.startswith("gpu") or re.search(r"(?i)cudnn|cublas|nvrtc|nccl|\.so\b|\.so\.|driver", l)]
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            keys = set(node)
            if keys & {"file", "path", "soname", "library"} and keys & {"version", "file", "path"}:
                found.append((path, node))
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    info = load_json(os.path.join(logs, "info.json"))
    if isinstance(info, dict):
        walk(info.get("gpu", info), "gpu")
    env = None
    for path in [os.path.join(logs, "per_layer.out"), os.path.join(logs, "dp", "resnet50-gpus1.json")] + \
            sorted(glob.glob(os.path.join(logs, "check", "*.json"))):
        doc = load_json(path)
        g = (doc or {}).get("environment", {}).get("gpu") if isinstance(doc, dict) else None
        if isinstance(g, dict):
            env = (os.path.basename(path), g)
            break
    if not (pick or found or env):
        return []
    lines += ["## Libraries cnnbench loaded", ""]
    if found:
        lines += ["| where (info.json) | library | file | version |", "|---|---|---|---|"]
        for path, d in found:
            lib = d.get("library") or d.get("name") or path.rsplit(".", 1)[-1]
            lines.append(f"| `{path}` | {lib} | `{d.get('file') or d.get('path') or d.get('soname') or ''}` | "
                         f"{d.get('version', '')} |")
        lines.append("")
    if pick:
        lines += ["`cnnbench info`:", "", "```text"] + pick[:20] + ["```", ""]
    if env:
        name, g = env
        parts = []
        for k, v in g.items():
            if k == "peaks":
                continue
            parts.append(f"{k} `{json.dumps(v, separators=(',', ':')) if isinstance(v, (dict, list)) else v}`")
        lines += [f"GPU environment of a GPU run's record (`{name}`): " + ", ".join(parts), ""]
    return lines


def quick_correctness(logs):
    st = steps(logs)
    rows = []
    if "tests_gpu" in st:
        rows.append(("GPU tests (`CNNBENCH_GPU=required`)", quick_result(logs, "tests_gpu", st["tests_gpu"])))
    for dl in ("f16_nhwc", "f32_nchw"):
        name = f"conv_check_{dl}"
        if name not in st:
            continue
        status = st[name][0]
        doc = load_json(os.path.join(logs, "check", f"conv_{dl}.json"))
        recs = doc.get("records", []) if isinstance(doc, dict) else []
        checked = [r for r in recs if r.get("check")]
        passed = [r for r in checked if r["check"].get("passed")]
        worst = max(checked, key=lambda r: err_key(r["check"].get("rel_err")), default=None)
        if checked:
            text = (f"{len(passed)}/{len(checked)} pass, worst {fmt_err(worst['check'].get('rel_err'))} "
                    f"({worst.get('problem')} {worst.get('dir')} {worst.get('algo')})")
            if status != "ok":
                text = f"**{status}**: {text}"
        else:
            text = status if status.startswith("skipped") else f"**{status}**: no checked records"
        dt, lay = dl.split("_")
        rows.append((f"`conv --from builtin:resnet50 --batch 2 --check`, {dt} {lay.upper()}", text))
    for dt, label, data, started, err in check_models(logs):
        name = f"check_{dt}" + (f"_{label}" if label else "")
        status = st.get(name, ("?",))[0]
        if data is None:
            last = err.strip().splitlines()[-1] if err.strip() else ""
            text = f"**{status}**: no JSON" + (f" (`{last[:200]}`)" if last else "")
        else:
            bad = [c for c in data if not c.get("passed")]
            worst = max(data, key=lambda c: err_key(c.get("rel_err")), default=None)
            models = list(OrderedDict.fromkeys(c.get("model") for c in data))
            text = (f"{len(data) - len(bad)}/{len(data)} tensors pass over {', '.join(models)}"
                    + (f", worst {fmt_err(worst.get('rel_err'))} ({worst.get('model')} {worst.get('tensor')}; "
                       f"tolerance {worst.get('tolerance')})" if worst else ""))
            if bad:
                text += "; FAILED: " + ", ".join(f"{c.get('model')} {c.get('tensor')}" for c in bad[:6])
            if status != "ok":
                text = f"**{status}**: {text}"
        rows.append((f"`check --device gpu --batch 2`, {dt}", text))
    if "check_bf16" in st and st["check_bf16"][0].startswith("skipped"):
        rows.append(("`check --device gpu --batch 2`, bf16", st["check_bf16"][0]))
    recs = allreduce_records(logs)
    if recs:
        bad = [r for r in recs if r.get("status") != "ok"]
        text = f"{len(recs) - len(bad)}/{len(recs)} records ok (every size, in and out of place, " \
               f"{', '.join(OrderedDict.fromkeys(str(r.get('dtype')) for r in recs))})"
        if bad:
            text = f"**{len(bad)} wrong**: " + "; ".join(
                f"{r.get('elements')} {r.get('dtype')} {'in' if r.get('in_place') else 'out'}: {r.get('status')}"
                for r in bad[:6]) + f" ({text})"
        rows.append(("`allreduce` (NCCL)", text))
    elif "allreduce" in st:
        rows.append(("`allreduce` (NCCL)", quick_result(logs, "allreduce", st["allreduce"])))
    if all(b.startswith("skipped") for _, b in rows):
        return []  # the step table says so
    return ["## Correctness", "", "| check | result |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows] + [""]


def quick_sanitizers(logs):
    st = steps(logs)
    names = [n for n in st if sanitizer_tool(n)]
    if all(st[n][0].startswith("skipped") for n in names):
        return []  # none ran (or none asked): the step table says so
    lines = ["## compute-sanitizer, default options (`--tool T --error-exitcode 1`)", "",
             "| tool | over | summary |", "|---|---|---|"]
    kinds_all = []
    for n in names:
        tool = sanitizer_tool(n)
        over = sanitizer_label(n).split(": ", 1)[1]
        status = st[n][0]
        if status.startswith("skipped"):
            text = status
        else:
            summ, kinds = sanitizer_result(logs, n)
            text = summ or "no summary line"
            if status != "ok":
                text = f"**{status}**: {text}"
            if kinds:
                kinds_all.append((n, kinds))
        lines.append(f"| {tool} | {over} | {text} |")
    lines.append("")
    for n, kinds in kinds_all:
        for kind, count in kinds.most_common(6):
            lines.append(f"- {n}: {count} x {kind}")
    if kinds_all:
        lines.append("")
    return lines


def quick_r50(logs):
    runs = {k: v for k, v in abba_runs(logs).items() if k[0] == "resnet50"}
    if not runs:
        return []
    lines = ["## ResNet-50 training step beside PyTorch (forward + backward, no update, synthetic input)", "",
             "`cnnbench model resnet50 --device gpu --layout nhwc --warmup 5 --iters 20` and "
             "`scripts/peers/pytorch_model.py resnet50 --device cuda --layout nhwc --warmup 5 --iters 20` "
             "(cudnn.benchmark, channels_last, autocast for f16/bf16, TF32 only in tf32) in ABBA order "
             "(cnnbench, PyTorch, PyTorch, cnnbench); each is the median of its two runs' median steps. "
             "img/s is cnnbench's; a ratio above 1: cnnbench faster.", "",
             "| dtype | layout | batch | cnnbench ms | PyTorch ms | img/s | PyTorch ms / cnnbench ms |",
             "|---|---|---:|---:|---:|---:|---:|"]
    detail = []
    for (m, b, dt, lay), t in sorted(runs.items(), key=lambda kv: (QUICK_ORDER.get(kv[0][2], 9), -kv[0][1])):
        c = median_or_none(t.get("cn", {}).values())
        p = median_or_none(t.get("pt", {}).values())
        ips = f"{b * 1000.0 / c:,.0f}" if c else "n/a"
        lines.append(f"| {dt} | {lay.upper()} | {b} | {fmt_opt_ms(c)} | {fmt_opt_ms(p)} | {ips} | "
                     f"{fmt_ratio(p / c if c and p else None)} |")
        detail.append(f"{dt} {b}: cnnbench {rounds_text(t.get('cn', {}))}; PyTorch {rounds_text(t.get('pt', {}))}")
    lines += ["", "Each run's median step ms, in round order: " + "; ".join(detail) + ".", ""]
    for path in sorted(glob.glob(os.path.join(logs, "pt_resnet50_*.err")))[:1]:
        first = [l for l in read(path).splitlines() if l.startswith("torch ")][:1]
        if first:
            lines += [f"PyTorch: {first[0]}", ""]
    return lines


def quick_per_layer(logs):
    doc = load_json(os.path.join(logs, "per_layer.out"))
    recs = doc.get("records", []) if isinstance(doc, dict) else []
    rec = next((r for r in recs if r.get("layers")), None)
    if rec is None:
        return []
    kinds = OrderedDict()
    for lay in rec["layers"]:
        k = kinds.setdefault(lay.get("kind") or "?", [0, 0.0, 0.0, 0.0])
        k[0] += 1
        k[1] += lay.get("forward_ms") or 0.0
        k[2] += lay.get("backward_ms") or 0.0
        k[3] += lay.get("percent") or 0.0
    tot = (rec.get("total_ms") or {}).get("median")
    lines = [f"### Where the {rec.get('dtype')} batch-{rec.get('batch')} step goes (`--per-layer`"
             + (f", {tot:.1f} ms" if tot else "") + ")", "",
             "| layer type | count | fwd ms | bwd ms | share of step |", "|---|---:|---:|---:|---:|"]
    for kind, (n, f, b, pc) in sorted(kinds.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
        lines.append(f"| {kind} | {n} | {f:.2f} | {b:.2f} | {pc:.1f}% |")
    return lines + ["", "(The full per-layer table is `per-layer.md` in the logs.)", ""]


def quick_lstm(logs):
    cn = [rnn_cn_times(os.path.join(logs, "rnn", f"cn_f16_{r}.json")) for r in (1, 2)]
    pt = [rnn_pt_times(os.path.join(logs, f"rnn_pt_f16_{r}.out")) for r in (1, 2)]
    if not any(cn) and not any(pt):
        return []
    order = [rnn_key(l) for l in read(os.path.join(logs, "deepbench-lstm.txt")).splitlines() if l.strip()]
    keys = list(OrderedDict.fromkeys(order + [k for d in cn + pt for k in d]))
    lines = ["## DeepBench's LSTM training problems beside PyTorch (f16, ABBA)", "",
             "`cnnbench rnn --algo standard --dir all --dtype f16` against `scripts/peers/pytorch_rnn.py "
             "--device cuda --dtype f16` (PyTorch's cuDNN LSTM), --warmup 3 --iters 10, each the median of its "
             "two runs. cnnbench's backward is bwd-data + bwd-weights (CUDA events); PyTorch's one "
             "`torch.autograd.grad` on the host clock. Ratios are PyTorch ms / cnnbench ms (above 1: cnnbench "
             "faster).", "",
             "| problem | cnnbench fwd ms | cnnbench bwd ms | PyTorch fwd ms | PyTorch bwd ms | fwd | bwd | "
             "fwd + bwd |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = {"fwd": [], "bwd": [], "step": []}
    for k in keys:
        c = {p: median_or_none([d[k][p] for d in cn if k in d]) for p in ("fwd", "bwd")}
        q = {p: median_or_none([d[k][p] for d in pt if k in d]) for p in ("fwd", "bwd")}
        c["step"] = c["fwd"] + c["bwd"] if c["fwd"] is not None else None
        q["step"] = q["fwd"] + q["bwd"] if q["fwd"] is not None else None
        rat = {}
        for p in ("fwd", "bwd", "step"):
            rat[p] = q[p] / c[p] if c[p] and q[p] else None
            if rat[p] is not None:
                ratios[p].append(rat[p])
        lines.append(f"| {k} | {fmt_opt_ms(c['fwd'])} | {fmt_opt_ms(c['bwd'])} | {fmt_opt_ms(q['fwd'])} | "
                     f"{fmt_opt_ms(q['bwd'])} | {fmt_ratio(rat['fwd'])} | {fmt_ratio(rat['bwd'])} | "
                     f"{fmt_ratio(rat['step'])} |")
    lines.append("")
    if ratios["step"]:
        lines.append(f"Median PyTorch ms / cnnbench ms over {len(ratios['step'])} problems: forward "
                     f"**{statistics.median(ratios['fwd']):.2f}**, backward **{statistics.median(ratios['bwd']):.2f}**, "
                     f"forward + backward **{statistics.median(ratios['step']):.2f}** (range "
                     f"{min(ratios['step']):.2f}-{max(ratios['step']):.2f}).")
    else:
        lines.append("No problem has both tools' times: see the steps above.")
    return lines + [""]


def lstm_median(logs):
    for line in quick_lstm(logs):
        m = re.search(r"forward \+ backward \*\*([0-9.]+)\*\*", line)
        if m:
            return float(m.group(1))
    return None


def quick_keras(logs):
    runs = {k: v for k, v in abba_runs(logs).items() if k[0] != "resnet50"}
    if not runs:
        return []
    lines = ["## The Keras models beside PyTorch (NHWC, ABBA)", "",
             "`cnnbench model MODELS --device gpu --warmup 5 --iters 50` and `pytorch_model.py MODELS --device "
             "cuda`, one process per tool and round; each the median of its two runs' median steps.", "",
             "| model | batch | dtype | cnnbench ms | PyTorch ms | PyTorch ms / cnnbench ms |",
             "|---|---:|---|---:|---:|---:|"]
    ratios = []
    for (m, b, dt, lay), t in runs.items():
        c = median_or_none(t.get("cn", {}).values())
        p = median_or_none(t.get("pt", {}).values())
        r = p / c if c and p else None
        if r is not None:
            ratios.append(r)
        lines.append(f"| {m} | {b} | {dt} | {fmt_opt_ms(c)} | {fmt_opt_ms(p)} | {fmt_ratio(r)} |")
    lines.append("")
    if ratios:
        lines += [f"Median PyTorch ms / cnnbench ms over {len(ratios)} models: **{statistics.median(ratios):.2f}** "
                  f"(cnnbench faster in {sum(1 for r in ratios if r > 1)}).", ""]
    return lines


def keras_median(logs):
    for line in quick_keras(logs):
        m = re.search(r"over (\d+) models: \*\*([0-9.]+)\*\*", line)
        if m:
            return float(m.group(2)), int(m.group(1))
    return None


def quick_nccl(logs):
    lines = dp_table(logs)
    recs = allreduce_records(logs)
    if recs:
        best = max(recs, key=lambda r: r.get("busbw_gbps") or 0)
        lines = ["## NCCL", "",
                 f"`allreduce`: {sum(1 for r in recs if r.get('status') == 'ok')}/{len(recs)} records ok; "
                 f"busbw up to {best.get('busbw_gbps', 0):.0f} GB/s ({best.get('elements')} {best.get('dtype')}, "
                 f"{best.get('ranks')} rank(s)); every record is in `dp/allreduce.json` in the logs.", ""] + lines
    return lines


def quick_compare(logs):
    st = steps(logs)
    names = [n for n in ("compare_model", "compare_conv") if n in st]
    if all(st[n][0].startswith("skipped: no GPU") or "not usable" in st[n][0] for n in names):
        return []
    lines = ["## cuDNN side by side (`cnnbench compare --cudnn`)", ""]
    folders = read(os.path.join(logs, "compare-folders.txt")).splitlines()[:1]
    if folders:
        lines += [f"Folders: {folders[0]}", ""]
    for n in names:
        status = st[n][0]
        lines.append(f"{quick_label(n)}: {status}")
        lines.append("")
        if status.startswith("skipped"):
            continue
        table = [l for l in read(os.path.join(logs, n + ".out")).splitlines() if l.startswith("|")]
        lines += table + ([""] if table else [])
        err = [l.strip() for l in read(os.path.join(logs, n + ".err")).splitlines() if l.strip()]
        notes = [l for l in err if "warning" in l.lower()]
        if status != "ok" and err:
            notes.append(err[-1])
        lines += [f"- `{l[:300]}`" for l in OrderedDict.fromkeys(notes)] + ([""] if notes else [])
    return lines


def quick(logs):
    lines = header(logs, "cnnbench GPU verification, quick (`scripts/gpu/verify.sh quick`)")
    torch = read(os.path.join(logs, "torch.txt")).strip().splitlines()
    if torch:
        lines.insert(-1, f"- PyTorch: {torch[-1]}")
    el = read(os.path.join(logs, "elapsed.txt")).split()
    secs = int(el[0]) if el and el[0].isdigit() else None
    done = len(el) > 3 and el[3] == "finished"
    if secs is not None:
        lines.insert(-1, f"- took {secs} s" + ("" if done else " so far (still running, or cut short here)")
                     + (f" (budget {el[1]} s, steps cut {el[2]} s after it)" if len(el) > 2 else ""))
    st = steps(logs)
    lines += ["## Steps", "", "| step | result | s |", "|---|---|---:|"]
    for name, s in st.items():
        lines.append(f"| {quick_label(name)} | {quick_result(logs, name, s)} | {s[1]} |")
    lines.append("")
    lines += quick_correctness(logs)
    lines += quick_sanitizers(logs)
    lines += quick_r50(logs)
    lines += quick_per_layer(logs)
    lines += quick_lstm(logs)
    lines += quick_keras(logs)
    lines += quick_nccl(logs)
    lines += quick_compare(logs)
    lines += quick_libraries(logs)

    gpu = st.get("gpu", ("", "", ""))
    fails = failed_steps(logs)
    skips = skipped_steps(logs)
    lines += ["## Closing note", ""]
    if gpu[0] != "ok":
        why = gpu[2] or gpu[0]
        text = ((f"{why[0].upper()}{why[1:]}" if why.startswith("no usable GPU") else f"No usable GPU here ({why})")
                + ": `cnnbench info` ran, and every GPU step is reported "
                f"as `{next((s for _, s in skips if s.startswith('skipped: no GPU') or 'not usable' in s), 'skipped')}`"
                + (f", in {secs} s" if secs is not None else "") + ".")
        if fails:
            text += " Failed: " + ", ".join(f"{n} ({s})" for n, s in fails) + "."
        lines.append(text)
        return lines
    text = [f"Quick verification on {gpu[2]}" + (f", {secs} s" if secs is not None else "")
            + ("" if done else " (not finished when this was written)") + "."]
    n_ok = sum(1 for s in st.values() if s[0] == "ok")
    text.append(f"{n_ok} steps ok, {len(fails)} failed, {len(skips)} skipped.")
    if fails:
        text.append("Failed or cut: " + ", ".join(f"{n} ({s})" for n, s in fails) + ".")
    lm = lstm_median(logs)
    if lm is not None:
        text.append(f"DeepBench LSTM f16: median PyTorch / cnnbench (fwd + bwd) {lm:.2f}.")
    km = keras_median(logs)
    if km:
        text.append(f"Keras models: median PyTorch / cnnbench {km[0]:.2f} over {km[1]}.")
    rerun_words, rerun_groups = [], []
    for name, s in st.items():
        m = re.match(r"^rerun: (\S+)(?: (\S+))?$", s[2].strip())
        if s[0].startswith("skipped") and m:
            if m.group(1) not in rerun_words:
                rerun_words.append(m.group(1))
            if m.group(2) and m.group(2) not in rerun_groups:
                rerun_groups.append(m.group(2))
    other = [(n, s) for n, s in skips if not st[n][2].startswith("rerun:")]
    if other:
        text.append("Skipped: " + ", ".join(f"{n} ({s})" for n, s in other[:10]) + (" ..." if len(other) > 10 else "")
                    + ".")
    if rerun_words:
        cmd = f'QUICK_STEPS="{" ".join(rerun_words)}"' + (f' QUICK_GROUPS="{" ".join(rerun_groups)}"'
                                                          if rerun_groups else "")
        text.append(f"The time budget skipped {', '.join(rerun_words)}"
                    + (f" ({', '.join(rerun_groups)})" if rerun_groups else "")
                    + f": `{cmd} scripts/gpu/verify.sh quick OUT2` runs just that.")
    if not fails and not skips:
        text.append("Every step ran and passed.")
    lines.append(" ".join(text))
    return lines


def main(argv):
    if len(argv) == 3 and argv[0] == "--part" and argv[1] == "paths":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import summary_paths
        lines = summary_paths.paths(argv[2])
    elif len(argv) == 3 and argv[0] == "--part" and argv[1] in ("1", "2", "3", "quick"):
        logs = argv[2]
        lines = {"1": part1, "2": part2, "3": part3, "quick": quick}[argv[1]](logs)
        if argv[1] == "2":
            with open(os.path.join(logs, "r50-algos.md"), "w") as f:
                f.write("\n".join(part2_algos(logs)) + "\n")
    elif len(argv) == 2 and argv[0] == "--per-layer":
        lines = per_layer(argv[1])
    elif len(argv) <= 1 and not (argv and argv[0].startswith("-")):
        lines = folder_summary(argv[0] if argv else ".")
    else:
        sys.stderr.write(__doc__)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
