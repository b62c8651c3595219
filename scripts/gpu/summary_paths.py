"""The summary of `scripts/gpu/verify.sh paths` (issue 28's optional GPU paths): correctness per
path, ResNet-50 and the Keras models per path beside the default step and PyTorch, the f32 API
comparison, and where the step goes with and without the paths. Called by summary.py
(`summary.py --part paths LOGS`); only the standard library; never fails on a missing or partial
file."""
import os
import re
from collections import OrderedDict

import summary as s

PATH_FLAGS = OrderedDict([
    ("default", "(none)"),
    ("own-kernels", "--own-kernels"),
    ("fuse-bn", "--fuse-bn"),
    ("cuda-graph", "--cuda-graph"),
    ("api-graph", "--api graph"),
    ("api-auto", "--api auto"),
    ("fuse-bn-relu", "--fuse-bn=relu"),
    ("rnn-auto", "--rnn-algo auto"),
    ("rnn-small-h", "--rnn-algo persist-static-small-h"),
    ("all", "--own-kernels --fuse-bn --cuda-graph --api auto --rnn-algo auto"),
    ("all-bnrelu", "--own-kernels --fuse-bn=relu --cuda-graph --api auto --rnn-algo auto"),
    ("own-bn", "--own-bn --fuse-bn"),
    ("own-bn-plain", "--own-bn"),
    ("all-own", "--own-kernels --own-bn --fuse-bn --cuda-graph --api auto --rnn-algo auto"),
    ("all-own-parts", "--own-kernels --own-bn=parts --fuse-bn --cuda-graph --api auto --rnn-algo auto"),
    ("deterministic", "--deterministic --api auto"),
    ("pt", "PyTorch eager"),
])


def path_runs(logs):
    """{(group, model, batch, dtype): {path: {round: total ms or None}}} from the CSV each
    `p_<path>_<group>_<round>` step printed."""
    out = OrderedDict()
    for name in s.steps(logs):
        m = re.match(r"^p_(.+?)_(r50|keras|f32|goal-[0-9a-z-]+)_([12])$", name)
        if not m:
            continue
        path, group, rnd = m.group(1), m.group(2), int(m.group(3))
        for r, ms in s.step_totals(logs, name):
            try:
                key = (group, r["model"], int(r["batch"]), r["dtype"])
            except (KeyError, TypeError, ValueError):
                continue
            out.setdefault(key, OrderedDict()).setdefault(path, {})[rnd] = ms
    return out


def runs_table(runs, group, title, intro):
    # "goal" gathers the goal groups (goal-BATCH-DTYPE-LAYOUT), one row
    # pair each, the layout beside the model.
    rows = {k: v for k, v in runs.items() if k[0] == group or (group == "goal" and k[0].startswith("goal-"))}
    if not rows:
        return []
    lines = [f"## {title}", "", intro, "",
             "| model | batch | dtype | path | runs (ms) | median ms | img/s | default ms / this ms | "
             "PyTorch ms / this ms |", "|---|---:|---|---|---|---:|---:|---:|---:|"]
    for (grp, model, b, dt), paths in rows.items():
        if grp.startswith("goal-"):
            model = f"{model} {grp.rsplit('-', 1)[-1].upper()}"
        med = {p: s.median_or_none([v for v in d.values() if v is not None]) for p, d in paths.items()}
        base, pt = med.get("default"), med.get("pt")
        for p in PATH_FLAGS:
            if p not in paths:
                continue
            m = med[p]
            ips = f"{b * 1000.0 / m:,.0f}" if m else "n/a"
            lines.append(f"| {model} | {b} | {dt} | {PATH_FLAGS[p]} | {s.rounds_text(paths[p])} | "
                         f"{s.fmt_opt_ms(m)} | {ips} | {s.fmt_ratio(base / m if base and m else None)} | "
                         f"{s.fmt_ratio(pt / m if pt and m else None)} |")
    return lines + [""]


def per_layer_kinds(logs, name):
    doc = s.load_json(os.path.join(logs, name + ".out"))
    recs = doc.get("records", []) if isinstance(doc, dict) else []
    rec = next((r for r in recs if r.get("layers")), None)
    if rec is None:
        return None, {}
    kinds = OrderedDict()
    for lay in rec["layers"]:
        k = kinds.setdefault(lay.get("kind") or "?", [0, 0.0])
        k[0] += 1
        k[1] += (lay.get("forward_ms") or 0.0) + (lay.get("backward_ms") or 0.0)
    return (rec.get("total_ms") or {}).get("median"), kinds


def per_layer_section(logs):
    a_tot, a = per_layer_kinds(logs, "per_layer_default")
    b_tot, b = per_layer_kinds(logs, "per_layer_paths")
    c_tot, c = per_layer_kinds(logs, "per_layer_own")
    if not a and not b and not c:
        return []
    lines = ["## Where the f16 batch-256 step goes, default against `--own-kernels --fuse-bn --api auto` "
             "and `--own-kernels --own-bn=parts --fuse-bn --api auto`",
             "", f"Step: default {s.fmt_opt_ms(a_tot)} ms, with the paths {s.fmt_opt_ms(b_tot)} ms, with the "
             f"own batch norm {s.fmt_opt_ms(c_tot)} ms (`--per-layer`, --iters 10; fused layers' time is "
             "counted in the layer that runs them).", "",
             "| layer type | default ms | with the paths ms | with the own batch norm ms |",
             "|---|---:|---:|---:|"]
    for kind in OrderedDict.fromkeys(list(a) + list(b) + list(c)):
        cols = [f"{t[kind][1]:.2f}" if kind in t else "-" for t in (a, b, c)]
        lines.append(f"| {kind} | {' | '.join(cols)} |")
    return lines + ["", "(Every layer's bytes, GB/s and roofline columns: `per-layer.md` in the logs.)", ""]


def bilstm_section(logs):
    """imdb-bilstm per layer on cuDNN's standard RNN algorithm and with --rnn-algo auto: each
    layer's times, and what the recurrent layer ran (its kernels column names auto's candidates)."""
    runs = []
    for name, label in (("per_layer_bilstm", "standard"), ("per_layer_bilstm_auto", "--rnn-algo auto")):
        doc = s.load_json(os.path.join(logs, name + ".out"))
        recs = doc.get("records", []) if isinstance(doc, dict) else []
        rec = next((r for r in recs if r.get("layers")), None)
        if rec is not None:
            runs.append((label, rec))
    if not runs:
        return []
    lines = ["## imdb-bilstm f32, batch 128, per layer: standard against `--rnn-algo auto`", "",
             "`model imdb-bilstm --per-layer` (--iters 20); the step is the median, each layer's "
             "forward + backward its median.", "",
             "| run | step ms | layer | fwd ms | bwd ms | kernels |", "|---|---:|---|---:|---:|---|"]
    for label, rec in runs:
        step = s.fmt_opt_ms((rec.get("total_ms") or {}).get("median"))
        for lay in rec["layers"]:
            lines.append(f"| {label} | {step} | {lay.get('name')} | {lay.get('forward_ms') or 0:.3f} | "
                         f"{lay.get('backward_ms') or 0:.3f} | {lay.get('kernels') or ''} |")
    return lines + [""]


def normconv_section(logs):
    """`conv --norm-conv` per layer and direction at batch 256 beside the plain convolution on the
    graph API, with the batch-2 check of the same layers: what NormConv's fused kernels cost
    over the convolution alone."""
    def listed(path, key="records"):
        doc = s.load_json(path)
        return doc.get(key, []) if isinstance(doc, dict) else []

    def key(r):
        return re.sub(r"^(g\d+)?mb\d+", "", r.get("problem") or ""), r.get("dir") or "-"

    def by_key(name):
        return {key(r): r for r in listed(os.path.join(logs, name))}

    fused = by_key("normconv_f16.json")
    for r in listed(os.path.join(logs, "normconv_f16.json"), "skipped"):
        fused.setdefault(key(r), {"algo": f"skipped: {r.get('status')}"})
    plain = by_key("conv_graph_normconv_f16.json")

    def checked(name):
        # A graph no engine ran is a skipped record naming cuDNN's answers.
        got = by_key(os.path.join("check", name))
        for r in listed(os.path.join(logs, "check", name), "skipped"):
            got.setdefault(key(r), {"skipped": r.get("status")})
        return got

    checks, checks_bf16 = checked("normconv_check.json"), checked("normconv_check_bf16.json")
    if not (fused or checks or checks_bf16):
        return []
    lines = ["## NormConv's fused graphs against the plain convolution (f16 NHWC, batch 256)", "",
             "`conv --norm-conv --dir all` (forward: scale, shift and ReLU in the prologue, the "
             "per-channel sum and sum of squares in the epilogue; data gradient: ReLU's backward and "
             "the batch norm's weight backward after it; weight gradient: the activation recomputed "
             "in the prologue) and `conv --api graph --dir FWD_D,BWD_D,BWD_W` on the same layers, "
             "medians of 20 runs; fused / plain above 1: the fusion costs that much over the "
             "convolution alone. The check ran the same layers at batch 2.", "",
             "| layer | dir | plain ms | plain engine | fused ms | fused engine | fused / plain | "
             "check f16 (batch 2) | check bf16 (batch 2) |",
             "|---|---|---:|---|---:|---|---:|---|---|"]

    def check_cell(checks, k):
        r = checks.get(k) or {}
        if r.get("skipped"):
            return f"skipped: {r['skipped']}"
        c = r.get("check")
        return "-" if not c else (f"{'ok' if c.get('passed') else 'FAILED'} ({s.fmt_err(c.get('rel_err'))}, "
                                  f"{r.get('algo', '-')})")

    for k in OrderedDict.fromkeys(list(fused) + list(plain) + list(checks) + list(checks_bf16)):
        f, p = fused.get(k, {}), plain.get(k, {})
        fm, pm = (f.get("ms") or {}).get("median"), (p.get("ms") or {}).get("median")
        ratio = f"{fm / pm:.2f}" if fm and pm else "-"
        lines.append(f"| {k[0]} | {k[1]} | {s.fmt_opt_ms(pm)} | {p.get('algo', '-')} | {s.fmt_opt_ms(fm)} | "
                     f"{f.get('algo', '-')} | {ratio} | {check_cell(checks, k)} | {check_cell(checks_bf16, k)} |")
    return lines + [""]


def paths(logs):
    lines = s.header(logs, "cnnbench GPU verification, issue 28's paths (`scripts/gpu/verify.sh paths`)")
    torch = s.read(os.path.join(logs, "torch.txt")).strip().splitlines()
    if torch:
        lines.insert(-1, f"- PyTorch: {torch[-1]}")
    st = s.steps(logs)
    lines += ["## Steps", "", "| step | result | s |", "|---|---|---:|"]
    for name, v in st.items():
        res = s.quick_result(logs, name, v)
        lines.append(f"| `{name}` | {res} | {v[1]} |")
    lines.append("")
    runs = path_runs(logs)
    lines += runs_table(runs, "r50", "ResNet-50 f16 NHWC, batch 256, per path",
                        "`cnnbench model resnet50 --device gpu --dtype f16 --layout nhwc --batch 256 --warmup 5 "
                        "--iters 20` with each path's flags, beside `scripts/peers/pytorch_model.py`; order: "
                        "default, all-own, all, PyTorch, PyTorch, all, all-own, default, then each path of "
                        "PATHS_SINGLES alone forward and back. "
                        "Medians of each run's median step; ratios above 1: this path faster.")
    lines += runs_table(runs, "keras", "The Keras models, batch 128, f32, per path",
                        "`cnnbench model ... --batch 128 --dtype f32 --warmup 5 --iters 50`: default, "
                        "--cuda-graph, all, PyTorch, PyTorch, all, --cuda-graph, default.")
    lines += runs_table(runs, "goal", "ResNet-50 with every path beside PyTorch (issue 28's goal table)",
                        "`all-own-parts` (or GOAL_PATH's path; the path column names its flags) against "
                        "`pytorch_model.py`, ABBA (cnnbench, PyTorch, PyTorch, cnnbench) per batch, dtype and "
                        "layout.")
    lines += runs_table(runs, "f32", "ResNet-50 f32, batch 64: the legacy API against the faster of both per layer",
                        "default (legacy), --api auto, --api auto, default.")
    lines += per_layer_section(logs)
    lines += bilstm_section(logs)
    lines += normconv_section(logs)
    gpu = st.get("gpu", ("", "", ""))
    fails = s.failed_steps(logs)
    skips = s.skipped_steps(logs)
    lines += ["## Closing note", ""]
    if gpu[0] != "ok":
        lines.append(f"No usable GPU here ({gpu[2] or gpu[0]}): every GPU step is reported as skipped.")
        return lines
    text = [f"Paths verification on {gpu[2]}.",
            f"{sum(1 for v in st.values() if v[0] == 'ok')} steps ok, {len(fails)} failed, {len(skips)} skipped."]
    if fails:
        text.append("Failed or cut: " + ", ".join(f"{n} ({v})" for n, v in fails) + ".")
    # "rerun: WORD" or, for a goal group, "rerun: goal BATCH:DTYPE:LAYOUT".
    words, groups = [], []
    for name, v in st.items():
        m = re.match(r"^rerun: (\S+)(?: (\S+))?$", v[2].strip())
        if not (v[0].startswith("skipped") and m):
            continue
        if m.group(1) not in words:
            words.append(m.group(1))
        if m.group(2) and m.group(2) not in groups:
            groups.append(m.group(2))
    if words:
        env = f'PATHS_STEPS="{" ".join(words)}"'
        if groups:
            env += f' GOAL_GROUPS="{" ".join(groups)}"'
            # The goal runs' path word, where it was not the default.
            gp = {m.group(1) for m in (re.match(r"^p_(.+)_goal-", n) for n in st) if m} - {"pt"}
            if gp and gp != {"all-own-parts"}:
                env += f" GOAL_PATH={sorted(gp)[0]}"
        named = [f"{w} ({', '.join(groups)})" if w == "goal" and groups else w for w in words]
        text.append(f'The budget skipped {", ".join(named)}: `{env} '
                    "scripts/gpu/verify.sh paths OUT2` runs just that.")
    lines.append(" ".join(text))
    return lines
