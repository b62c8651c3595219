#!/usr/bin/env python3
"""PyTorch peer of cnnbench: times the same convolution problems with PyTorch.

PyTorch's CPU convolutions run on its bundled oneDNN (MKL-DNN), so these
numbers are the oneDNN-through-a-framework baseline to put beside cnnbench's.

Set up once (creates .venv at the repository root, see setup.sh):

    scripts/peers/setup.sh

Run (the malloc settings keep glibc from returning freed output buffers to
the OS, so outputs are not page-faulted in again on every call):

    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776 \\
        .venv/bin/python scripts/peers/pytorch_conv.py [--from FILE|builtin:resnet50] [DESC ...]
            [--dir fwd,bwd-data,bwd-filter|all] [--warmup N] [--iters N]
            [--min-time SECS] [--threads N] [--peak-gflops X] [--seed N] [--as-written]

Problems are oneDNN benchdnn convolution descriptors, parsed exactly as
cnnbench parses them, e.g. `mb16ic64ih56oc64oh56kh3ph1`,
`g2mb2ic96ih27oc256kh5ph2`,
`mb4_ic1ih161iw700_oc32_kh5kw20_sh2sw2_ph0pw0_n"deepspeech:conv1"`.
Keys g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw take a decimal number;
`_` is ignored; n"..." names the problem. Defaults: mb 2, stride 1, padding 0,
groups 1, dilation 0. An h value given alone (ih kh oh sh ph dh) copies into
w; a w value alone leaves h at its default. Dilation is oneDNN's (dh0 is
dense, dh1 skips one pixel; PyTorch's dilation is dh+1). oh/ow are computed,
and must match when given. A --from file holds one descriptor per line; `#`
starts a comment, blank lines are skipped. `builtin:resnet50` is the 23
distinct convolutions of ResNet-50 v1.5 at batch 16, 224x224 (the same list
as cnnbench's builtin).

Each problem x direction is timed in fp32, channels_last (NHWC) tensors:
  fwd         aten.convolution with bias
  bwd-data    aten.convolution_backward, output_mask [True, False, False]
  bwd-filter  aten.convolution_backward, output_mask [False, True, True]
              (weight and bias gradients)
under torch.inference_mode(), on random inputs from a seeded generator.
After the warm-up each call is timed alone with time.perf_counter(). Runs: at
least 10 and at least 1 s per direction by default; --iters N alone means
exactly N runs; --iters with --min-time means both must be met (cnnbench's
rule).

Output: CSV on stdout, one row per problem x direction:
  problem,dir,device,dtype,layout,algo,ms_min,ms_median,ms_max,ms_mean,
  ms_stddev,runs,gflops,peak_fraction,check_rel_err,check_passed,kernel,bias,
  workspace_bytes
problem is cnnbench's canonical form of the descriptor (what cnnbench itself
prints, so rows join; --as-written keeps the input text); algo is
pytorch-<version>; kernel is the aten backend PyTorch chose (aten:mkldnn is
oneDNN);
gflops = 2*mb*oh*ow*oc*(ic/g)*kh*kw / median; peak_fraction only with
--peak-gflops; the check columns are empty (nothing is verified here). One
line about torch, threads and oneDNN goes to stderr, plus a warning for any
problem PyTorch does not send to oneDNN.

Bad input (descriptor, file, option) prints one line on stderr and exits 2.
"""

import argparse
import csv
import math
import os
import re
import statistics
import sys
import time

# --------------------------------------------------------------------------
# Descriptors (mirrors src/problem/desc.rs)

KEYS = ["mb", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "sh", "sw",
        "ph", "pw", "dh", "dw", "g", "n"]
KEYS_3D = ["id", "od", "kd", "sd", "pd", "dd"]

# cnnbench's built-in lists, read from the same files cnnbench compiles in.
LISTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "problem", "lists")
BUILTINS = {f[:-4]: os.path.join(LISTS_DIR, f) for f in sorted(os.listdir(LISTS_DIR)) if f.endswith(".txt")}

DIRS = ["fwd", "bwd-data", "bwd-filter"]


class InputError(Exception):
    """Bad user input: reported as one line, exit status 2."""


class Problem:
    __slots__ = ("text", "name", "mb", "g", "ic", "ih", "iw", "oc", "oh", "ow",
                 "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw")

    def flops(self):
        return 2 * self.mb * self.oh * self.ow * self.oc * (self.ic // self.g) * self.kh * self.kw

    def canonical(self):
        s = f"g{self.g}" if self.g != 1 else ""
        s += f"mb{self.mb}ic{self.ic}ih{self.ih}"
        if self.iw != self.ih:
            s += f"iw{self.iw}"
        s += f"oc{self.oc}oh{self.oh}"
        if self.ow != self.oh:
            s += f"ow{self.ow}"
        s += f"kh{self.kh}"
        if self.kw != self.kh:
            s += f"kw{self.kw}"
        for h, w, dflt in (("sh", "sw", 1), ("ph", "pw", 0), ("dh", "dw", 0)):
            hv, wv = getattr(self, h), getattr(self, w)
            if hv != dflt or wv != dflt:
                s += f"{h}{hv}"
                if wv != hv:
                    s += f"{w}{wv}"
        if self.name is not None:
            s += f'n"{self.name}"'
        return s


def _tokenize(desc):
    vals, name = {}, None
    if not desc.strip():
        raise InputError("empty problem descriptor")
    i = 0
    while i < len(desc):
        if desc[i] == "_":
            i += 1
            continue
        rest = desc[i:]
        k3 = next((k for k in KEYS_3D if rest.startswith(k)), None)
        if k3:
            raise InputError(f"'{k3}' in '{desc}': only 2-D convolutions are supported")
        key = next((k for k in KEYS if rest.startswith(k)), None)
        if key is None:
            bad = re.match(r"[^0-9_]*", rest).group(0)
            raise InputError(f"unknown token '{bad}' in '{desc}' (expected one of "
                             'g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw n"...")')
        i += len(key)
        if key == "n":
            if not desc[i:].startswith('"'):
                raise InputError(f"name in '{desc}' must be quoted: n\"...\"")
            end = desc.find('"', i + 1)
            if end < 0:
                raise InputError(f"unterminated name n\"... in '{desc}'")
            if name is not None:
                raise InputError(f"'n' given twice in '{desc}'")
            name = desc[i + 1:end]
            i = end + 1
            continue
        digits = re.match(r"[0-9]*", desc[i:]).group(0)
        if not digits:
            got = f"'{desc[i]}'" if i < len(desc) else "end of input"
            raise InputError(f"'{key}' in '{desc}' must be followed by a non-negative number, got {got}")
        i += len(digits)
        if key in vals:
            raise InputError(f"'{key}' given twice in '{desc}'")
        value = int(digits)
        if value >= 2**64:  # cnnbench parses into a usize
            raise InputError(f"'{key}{digits}' in '{desc}' is too large")
        vals[key] = value
    return vals, name


def _out_size(axis, i, k, s, p, d):
    extent = (k - 1) * (d + 1) + 1
    padded = i + 2 * p
    if padded < extent:
        raise InputError(f"output {axis} would be empty: kernel extent {extent} "
                         f"is larger than the padded input {padded}")
    return (padded - extent) // s + 1


def parse_problem(desc):
    vals, name = _tokenize(desc)
    try:
        return _build(desc, vals, name)
    except InputError as e:
        raise InputError(f"in problem '{desc}': {e}") from None


def _build(desc, f, name):
    def positive(key, v):
        if v == 0:
            raise InputError(f"'{key}' must be at least 1, got 0")
        return v

    def need(key):
        if key not in f:
            raise InputError(f"'{key}' is missing")
        return f[key]

    def pair(h, w, default):
        hv, wv = f.get(h), f.get(w)
        if hv is not None:
            return hv, (wv if wv is not None else hv)
        return default, (wv if wv is not None else default)

    p = Problem()
    p.text, p.name = desc, name
    p.g = positive("g", f.get("g", 1))
    p.mb = positive("mb", f.get("mb", 2))
    p.ic = positive("ic", need("ic"))
    p.oc = positive("oc", need("oc"))
    if "ih" not in f and "iw" not in f:
        raise InputError("'ih' is missing")
    if "kh" not in f and "kw" not in f:
        raise InputError("'kh' is missing")
    p.ih, p.iw = pair("ih", "iw", 1)
    p.kh, p.kw = pair("kh", "kw", 1)
    p.sh, p.sw = pair("sh", "sw", 1)
    p.ph, p.pw = pair("ph", "pw", 0)
    p.dh, p.dw = pair("dh", "dw", 0)
    for key in ("ih", "iw", "kh", "kw", "sh", "sw"):
        positive(key, getattr(p, key))
    if p.ic % p.g:
        raise InputError(f"ic{p.ic} is not divisible by g{p.g}")
    if p.oc % p.g:
        raise InputError(f"oc{p.oc} is not divisible by g{p.g}")
    p.oh = _out_size("h", p.ih, p.kh, p.sh, p.ph, p.dh)
    p.ow = _out_size("w", p.iw, p.kw, p.sw, p.pw, p.dw)
    for key, computed in (("oh", p.oh), ("ow", p.ow)):
        if key in f and f[key] != computed:
            raise InputError(f"{key}{f[key]} does not match the computed output size {computed}")
    if "oh" in f and "ow" not in f and f["oh"] != p.ow:
        raise InputError(f"ow (copied from oh{f['oh']}) does not match the computed output width {p.ow}")
    return p


def load_batch(source):
    if source.startswith("builtin:"):
        name = source[len("builtin:"):]
        if name not in BUILTINS:
            raise InputError(f"unknown built-in list '{name}' (known: {', '.join(BUILTINS)})")
        with open(BUILTINS[name]) as f:
            text = f.read()
    else:
        try:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read '{source}': {getattr(e, 'strerror', None) or e}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        try:
            out.append(parse_problem(line))
        except InputError as e:
            raise InputError(f"{source}:{n}: {e}") from None
    if not out:
        raise InputError(f"{source} holds no problems")
    return out


# --------------------------------------------------------------------------
# Options


def parse_dirs(s):
    out = []
    for d in s.split(","):
        d = d.strip()
        if d == "all":
            out.extend(DIRS)
        elif d in DIRS:
            out.append(d)
        else:
            raise InputError(f"unknown direction '{d}' in --dir (expected fwd, bwd-data, bwd-filter or all)")
    return [d for d in DIRS if d in out]  # canonical order, no duplicates


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def parse_args(argv):
    ap = Parser(prog="pytorch_conv.py",
                description="Time benchdnn-style convolution problems with PyTorch (CPU, fp32, NHWC).")
    ap.add_argument("problems", nargs="*", metavar="DESC", help="benchdnn convolution descriptors")
    ap.add_argument("--from", dest="source", action="append", default=[], metavar="FILE|builtin:NAME",
                    help="batch file (one descriptor a line) or builtin:resnet50; may repeat")
    ap.add_argument("--dir", default="all", help="fwd,bwd-data,bwd-filter or all (default all)")
    ap.add_argument("--warmup", type=int, default=None, metavar="N", help="untimed runs first (default 3)")
    ap.add_argument("--iters", type=int, default=None, metavar="N",
                    help="timed runs: alone, exactly N; with --min-time, at least N (default at least 10)")
    ap.add_argument("--min-time", type=float, default=None, metavar="SECS",
                    help="keep timing until this long has been spent (default 1)")
    ap.add_argument("--threads", type=int, default=None, metavar="N", help="torch.set_num_threads(N)")
    ap.add_argument("--peak-gflops", type=float, default=None, metavar="X",
                    help="FP32 peak to compute peak_fraction against")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    ap.add_argument("--as-written", dest="canonical", action="store_false",
                    help="print problems as written instead of in cnnbench's canonical form")
    a = ap.parse_args(argv)
    for opt, v, lo in (("--warmup", a.warmup, 0), ("--iters", a.iters, 1), ("--threads", a.threads, 1)):
        if v is not None and v < lo:
            ap.error(f"{opt} must be at least {lo}, got {v}")
    if a.min_time is not None and not (a.min_time >= 0 and math.isfinite(a.min_time)):
        ap.error(f"--min-time must be a non-negative number of seconds, got {a.min_time}")
    if a.peak_gflops is not None and not (a.peak_gflops > 0 and math.isfinite(a.peak_gflops)):
        ap.error(f"--peak-gflops must be positive, got {a.peak_gflops}")
    if not a.problems and not a.source:
        ap.error("no problems: give descriptors and/or --from FILE|builtin:resnet50")
    return a


def run_policy(warmup, iters, min_time):
    """(warmup, min_runs, min_time_s, max_runs), cnnbench's RunPolicy::from_options."""
    warmup = 3 if warmup is None else warmup
    if iters is not None and min_time is None:
        return warmup, iters, 0.0, iters
    n = 10 if iters is None else iters
    return warmup, n, (1.0 if min_time is None else min_time), max(100_000, iters or 0)


# --------------------------------------------------------------------------
# Timing


def make_call(torch, p, d, gen):
    """The closure that runs one direction of p, on fresh random tensors."""
    cl = torch.channels_last

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    x = rnd(p.mb, p.ic, p.ih, p.iw).contiguous(memory_format=cl)
    w = rnd(p.oc, p.ic // p.g, p.kh, p.kw).contiguous(memory_format=cl)
    b = rnd(p.oc)
    stride, padding, dilation = [p.sh, p.sw], [p.ph, p.pw], [p.dh + 1, p.dw + 1]
    conv = torch.ops.aten.convolution.default
    conv_bwd = torch.ops.aten.convolution_backward.default
    if d == "fwd":
        args = (x, w, b, stride, padding, dilation, False, [0, 0], p.g)
        return (lambda: conv(*args)), (x, w, b)
    dy = rnd(p.mb, p.oc, p.oh, p.ow).contiguous(memory_format=cl)
    if d == "bwd-data":
        args = (dy, x, w, None, stride, padding, dilation, False, [0, 0], p.g, [True, False, False])
    else:
        args = (dy, x, w, [p.oc], stride, padding, dilation, False, [0, 0], p.g, [False, True, True])
    return (lambda: conv_bwd(*args)), (x, w, b)


def backend_of(torch, p, x, w, b):
    """PyTorch's choice of convolution backend for p (e.g. 'Mkldnn'), or None."""
    try:
        be = torch._C._select_conv_backend(x, w, b, [p.sh, p.sw], [p.ph, p.pw], [p.dh + 1, p.dw + 1],
                                           False, [0, 0], p.g, None)
        return str(be).split(".")[-1]
    except Exception:  # private API: best effort only
        return None


def time_call(fn, policy):
    warmup, min_runs, min_time, max_runs = policy
    for _ in range(warmup):
        fn()
    ms = []
    clock = time.perf_counter
    start = clock()
    while len(ms) < max_runs and (len(ms) < min_runs or clock() - start < min_time):
        t0 = clock()
        fn()
        ms.append((clock() - t0) * 1e3)
    return ms


def stats(ms):
    v = sorted(ms)
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return v[0], statistics.median(v), v[-1], statistics.fmean(v), sd


def main(argv):
    a = parse_args(argv)
    try:
        dirs = parse_dirs(a.dir)
        problems = []
        for src in a.source:
            problems += load_batch(src)
        problems += [parse_problem(d) for d in a.problems]
    except InputError as e:
        sys.stderr.write(f"pytorch_conv.py: error: {e}\n")
        return 2
    policy = run_policy(a.warmup, a.iters, a.min_time)

    try:
        import torch
    except ImportError as e:
        sys.stderr.write(f"pytorch_conv.py: error: cannot import torch ({e}); run scripts/peers/setup.sh "
                         "and use .venv/bin/python\n")
        return 1
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    version = torch.__version__.split("+")[0]
    algo = f"pytorch-{version}"
    mkldnn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
    malloc_ok = os.environ.get("MALLOC_MMAP_MAX_") == "0"
    sys.stderr.write(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"mkldnn {'used' if mkldnn else 'NOT used'} (available {torch.backends.mkldnn.is_available()}, "
        f"enabled {torch.backends.mkldnn.enabled}), {len(problems)} problem(s) x {len(dirs)} dir(s)"
        + ("" if malloc_ok else ", MALLOC_MMAP_MAX_=0 not set") + "\n")

    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["problem", "dir", "device", "dtype", "layout", "algo", "ms_min", "ms_median", "ms_max",
                  "ms_mean", "ms_stddev", "runs", "gflops", "peak_fraction", "check_rel_err", "check_passed",
                  "kernel", "bias", "workspace_bytes"])
    sys.stdout.flush()
    gen = torch.Generator().manual_seed(a.seed)
    with torch.inference_mode():
        for p in problems:
            label = p.canonical() if a.canonical else p.text
            for i, d in enumerate(dirs):
                fn, xwb = make_call(torch, p, d, gen)
                if i == 0:
                    be = backend_of(torch, p, *xwb)
                    kernel = "aten:" + (be or "unknown").lower()
                    if be is not None and be != "Mkldnn":
                        sys.stderr.write(f"pytorch_conv.py: warning: PyTorch runs {label} on its "
                                         f"{be} backend, not oneDNN\n")
                del xwb
                ms = time_call(fn, policy)
                del fn
                mn, med, mx, mean, sd = stats(ms)
                gflops = p.flops() / (med * 1e-3) / 1e9
                peak = "" if a.peak_gflops is None else repr(gflops / a.peak_gflops)
                out.writerow([label, d, "cpu", "f32", "nhwc", algo, repr(mn), repr(med), repr(mx), repr(mean),
                              repr(sd), len(ms), repr(gflops), peak, "", "",
                              kernel, "false" if d == "bwd-data" else "true", ""])
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.stderr.write("pytorch_conv.py: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
