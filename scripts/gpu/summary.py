#!/usr/bin/env python3
"""Markdown summaries of scripts/gpu/verify.sh's logs.

    summary.py --part N LOGS       the summary of verify.sh part N (1, 2 or 3)
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


def sanitizer_result(logs, name):
    text = read(os.path.join(logs, name + ".out")) + read(os.path.join(logs, name + ".err"))
    summary = re.findall(r"=+ ERROR SUMMARY: .*", text)
    kinds = Counter()
    for line in text.splitlines():
        m = re.match(r"^=+ (Invalid .*?|Program hit .*?|Uninitialized .*?|Leaked .*?|.*error.*?)( at |$)", line)
        if m and "ERROR SUMMARY" not in line:
            kinds[re.sub(r"0x[0-9a-f]+", "0x…", m.group(1))] += 1
    return (summary[-1].lstrip("= ") if summary else None), kinds


def nccl_section(logs):
    """The all-reduce table and the data-parallel records of part 1."""
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
    rows = []
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
        "memcheck_model": "memcheck: `model resnet18 --device gpu --batch 8 --warmup 0 --iters 1`",
        "memcheck_conv_f32_nchw": "memcheck: `conv mb4ic32ih28oc64oh28kh3ph1 --dtype f32 --layout nchw "
                                  "--dir all --algo all --check`",
        "memcheck_conv_f16_nhwc": "memcheck: `conv mb4ic32ih28oc64oh28kh3ph1 --dtype f16 --layout nhwc "
                                  "--dir all --algo all --check`",
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
        if name.startswith("memcheck_"):
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
                         + ", and compute-sanitizer's memcheck reported: "
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


def per_layer_md(rnd, r, limit=None, title=""):
    layers = r["layers"]
    lines = [f"## {title}{r.get('model')} batch {r.get('batch')} {r.get('dtype')} {r.get('layout')} on "
             f"{r.get('device')}" + (f", round {rnd}" if rnd else ""), "",
             f"step {r['total_ms']['median']:.2f} ms (median), forward {r['forward_ms']['median']:.2f}, "
             f"backward {r['backward_ms']['median']:.2f}", "",
             "| layer | type | output | fwd ms | bwd ms | % of step | algorithms |",
             "|---|---|---|---:|---:|---:|---|"]
    rows = layers if limit is None else sorted(layers, key=lambda l: -(l.get("percent") or 0))[:limit]
    for lay in rows:
        lines.append(f"| {lay.get('name')} | {lay.get('kind')} | {lay.get('output')} | "
                     f"{lay.get('forward_ms') or 0:.3f} | {lay.get('backward_ms') or 0:.3f} | "
                     f"{lay.get('percent') or 0:.1f} | {lay.get('kernels') or ''} |")
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


def main(argv):
    if len(argv) == 3 and argv[0] == "--part" and argv[1] in ("1", "2", "3"):
        logs = argv[2]
        lines = {"1": part1, "2": part2, "3": part3}[argv[1]](logs)
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
