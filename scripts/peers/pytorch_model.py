#!/usr/bin/env python3
"""PyTorch peer of `cnnbench model`: times whole-network training steps with PyTorch.

It builds the same networks cnnbench knows, by the same names, runs forward
and backward passes on them with PyTorch, and prints cnnbench's model CSV
columns, so the two can be put side by side. On CPU, PyTorch's convolutions
run on its bundled oneDNN (MKL-DNN); on NVIDIA GPUs, on cuDNN and cuBLAS.

Set up once (creates .venv at the repository root, see setup.sh; this script
also needs torchvision, the release paired with the pinned torch, installed
with `.venv/bin/pip install --no-deps torchvision==<version>`):

    scripts/peers/setup.sh

Run (the malloc settings keep glibc from returning freed activation buffers
to the OS, so they are not page-faulted in again on every step):

    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776 \\
        .venv/bin/python scripts/peers/pytorch_model.py MODEL [MODEL ...|all]
            [--batch N] [--device cpu|cuda] [--dtype f32|tf32|f16|bf16]
            [--layout nhwc|nchw] [--update none|sgd] [--warmup N] [--iters N]
            [--min-time SECS] [--threads N] [--seed N]

Models (cnnbench's names; `all` runs every one, in this order):
  alexnet       BVLC/Caffe AlexNet (the one-GPU Caffe model, with grouped
                conv2/4/5, LRN and ceil-mode pooling), 227x227, built here;
                60,965,224 parameters (checked)
  googlenet     torchvision googlenet(aux_logits=False, init_weights=False), 224x224
  inception-v3  torchvision inception_v3(aux_logits=False, init_weights=False), 299x299
  vgg16 vgg19   torchvision, 224x224
  resnet18 resnet34 resnet50 resnet101 resnet152
                torchvision (v1.5: stride on the 3x3 conv), 224x224
  resnet200     pre-activation bottleneck ResNet, [3, 24, 36, 3] blocks, as in
                fb.resnet.torch models/preresnet.lua, 224x224, built here
                (its reading of the Lua source is set by the RESNET200_*
                constants below)
All have 1000 classes and random (seeded) weights; torchvision's models are
built with weights=None, so there is no input transform.

What is timed. The model is in train() mode (batch norm normalizes with the
batch's statistics and updates its running averages; dropout is active). For
--layout nhwc (the default) the model and the input are in
torch.channels_last; nchw leaves both contiguous. The input is one fixed
batch, made once from a seeded generator: images torch.randn(batch, 3, H, W),
labels torch.randint(0, 1000, (batch,)). Each training step is:
  untimed   for p in model.parameters(): p.grad = None
  fwd       logits = model(x); loss = F.cross_entropy(logits, labels)
            (mean over the batch)
  bwd       loss.backward()
  update    with --update sgd only: opt.step(), with
            torch.optim.SGD(lr=0.01, momentum=0.9) (its default foreach
            implementation); timed on its own and added into the total only
Each phase is timed on its own with time.perf_counter(); on CUDA the device is
synchronized before and after every phase, so each time is the GPU's work for
that phase. After the warm-up steps (default 3), steps are timed until both
rules are met: at least 10 steps and at least 1 s by default; --iters N alone
means exactly N steps; --iters with --min-time means both must be met
(cnnbench's rule).

Devices and dtypes. CPU runs only f32. On CUDA, torch.backends.cudnn.benchmark
is on (PyTorch's autotuner picks each convolution's algorithm during the
warm-up), and
  f32   plain fp32: TF32 off for cuDNN and for cuBLAS matmuls
  tf32  fp32 tensors, TF32 tensor-core math allowed for cuDNN and matmuls
  f16   PyTorch's automatic mixed precision: torch.autocast("cuda",
  bf16  dtype=float16 / bfloat16) around the model's forward; the weights stay
        fp32 (master weights, so the gradients and the SGD update are fp32),
        and the loss is computed in fp32 from the logits. No loss scaling
        (GradScaler) is done: these are timings, the gradient values are not
        used for training.

Out of memory (torch.OutOfMemoryError, or a RuntimeError saying "out of
memory" or "can't allocate memory") gives that model a row with status OOM and
empty times and runs, and the next model goes on.

Output: CSV on stdout, a header and one row per model, flushed as each
finishes (Ctrl-C keeps the rows already written, and exits 130):
  model,batch,device,dtype,layout,params,macs,fwd_ms_min,fwd_ms_median,
  fwd_ms_max,fwd_ms_mean,fwd_ms_stddev,bwd_ms_min,bwd_ms_median,bwd_ms_max,
  bwd_ms_mean,bwd_ms_stddev,total_ms_median,images_per_sec,runs,status
device is `pytorch-<torch version> cpu` or `pytorch-<torch version> <CUDA
device name>`; params is the sum of numel() over the model's parameters;
macs is the forward multiply-accumulates per image of the convolutions
(output elements x in_channels/groups x kh x kw) and linear layers
(in_features x out_features), counted with forward hooks during one untimed
forward at batch 1 (eval mode, no_grad); ms columns have 3 decimals, stddev is
the sample standard deviation (n-1), as cnnbench's; total_ms_median is the
median over steps of each step's fwd + bwd (+ update); images_per_sec =
batch / total_ms_median (in seconds), 1 decimal; runs is the number of timed
steps; status is ok or OOM.

On stderr: one line about torch, threads, oneDNN (or the CUDA device and
cuDNN) and the dtype; then one line per model with its input size, parameter
and MAC counts, and the median update time with --update sgd.

Bad input (model name, option, a device or dtype this machine or PyTorch
cannot run) prints one line on stderr and exits 2.
"""

import contextlib
import csv
import gc
import math
import os
import statistics
import sys
import time

# Shared with the convolution peer: one-line errors, cnnbench's run policy
# and statistics.
from pytorch_conv import InputError, Parser, run_policy, stats

PROG = "pytorch_model.py"

MODELS = ["alexnet", "googlenet", "inception-v3", "vgg16", "vgg19", "resnet18", "resnet34",
          "resnet50", "resnet101", "resnet152", "resnet200"]
INPUT_SIZE = {m: 224 for m in MODELS}
INPUT_SIZE.update({"alexnet": 227, "inception-v3": 299})
NEEDS_TORCHVISION = {m for m in MODELS if m not in ("alexnet", "resnet200")}
NUM_CLASSES = 1000

ALEXNET_PARAMS = 60_965_224  # BVLC/Caffe bvlc_alexnet, checked after building

# ResNet-200: the reading of fb.resnet.torch models/preresnet.lua (the final
# version, facebookarchive/fb.resnet.torch). Adjust these three if another
# reading is wanted; the parameter count each gives (ImageNet, 1000 classes):
#   conv bias  shortcut BN  layer-1 preact   params
#   no         yes          none             64,672,808  <- the source as written
#   no         yes          blocks 2..3      64,673,832
#   no         no           none             64,665,128
#   no         no           blocks 2..3      64,666,152
#   yes        ...                           +88,000 each
RESNET200_TARGET_PARAMS = 64_672_808
# ConvInit drops every convolution's bias when cudnn.version >= 4000.
RESNET200_CONV_BIAS = False
# shortcut(): type B, a 1x1 convolution *followed by SpatialBatchNormalization*
# where the number of planes changes (older revisions had the conv alone).
RESNET200_SHORTCUT_BN = True
# layer(block, 64, def[1], 1, 'first') passes type 'first' to every block of
# layer 1, so no block there has the pre-activation BN + ReLU (the stem's BN +
# ReLU precedes block 1). True gives blocks 2 and 3 of layer 1 their
# pre-activation, as in the other layers.
RESNET200_LAYER1_PREACT = False
RESNET200_BLOCKS = (3, 24, 36, 3)


# --------------------------------------------------------------------------
# Networks


def build_alexnet(nn):
    """BVLC/Caffe AlexNet (models/bvlc_alexnet/deploy.prototxt), 227x227 input."""

    def lrn():  # Caffe's ACROSS_CHANNELS LRN: x / (k + alpha/n * sum x^2)^beta
        return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)

    def pool():
        return nn.MaxPool2d(3, stride=2, ceil_mode=True)

    relu = lambda: nn.ReLU(inplace=True)  # noqa: E731
    model = nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), relu(), lrn(), pool(),                 # conv1 -> 27x27
        nn.Conv2d(96, 256, 5, padding=2, groups=2), relu(), lrn(), pool(),     # conv2 -> 13x13
        nn.Conv2d(256, 384, 3, padding=1), relu(),                             # conv3
        nn.Conv2d(384, 384, 3, padding=1, groups=2), relu(),                   # conv4
        nn.Conv2d(384, 256, 3, padding=1, groups=2), relu(), pool(),           # conv5 -> 6x6
        nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), relu(), nn.Dropout(0.5),                 # fc6
        nn.Linear(4096, 4096), relu(), nn.Dropout(0.5),                        # fc7
        nn.Linear(4096, NUM_CLASSES),                                          # fc8
    )
    n = sum(p.numel() for p in model.parameters())
    if n != ALEXNET_PARAMS:
        raise AssertionError(f"AlexNet has {n} parameters, expected {ALEXNET_PARAMS}")
    return model


def build_resnet200(nn):
    """Pre-activation ResNet-200 of fb.resnet.torch models/preresnet.lua."""

    class Bottleneck(nn.Module):
        # s: [BN + ReLU] -> 1x1 n -> BN ReLU -> 3x3 n (stride) -> BN ReLU -> 1x1 4n
        # plus shortcut(x): identity, or a 1x1 conv (stride) [+ BN] when the
        # number of planes changes. The pre-activation sits in the residual
        # branch only: the shortcut sees the block's input as it is.
        def __init__(self, cin, n, stride, preact):
            super().__init__()
            bias = RESNET200_CONV_BIAS
            layers = [nn.BatchNorm2d(cin), nn.ReLU(inplace=True)] if preact else []
            layers += [
                nn.Conv2d(cin, n, 1, bias=bias), nn.BatchNorm2d(n), nn.ReLU(inplace=True),
                nn.Conv2d(n, n, 3, stride=stride, padding=1, bias=bias), nn.BatchNorm2d(n),
                nn.ReLU(inplace=True),
                nn.Conv2d(n, 4 * n, 1, bias=bias),
            ]
            self.residual = nn.Sequential(*layers)
            if cin != 4 * n:  # shortcut type B
                sc = [nn.Conv2d(cin, 4 * n, 1, stride=stride, bias=bias)]
                if RESNET200_SHORTCUT_BN:
                    sc.append(nn.BatchNorm2d(4 * n))
                self.shortcut = nn.Sequential(*sc)
            else:
                assert stride == 1
                self.shortcut = nn.Identity()

        def forward(self, x):
            return self.residual(x) + self.shortcut(x)

    bias = RESNET200_CONV_BIAS
    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=bias), nn.BatchNorm2d(64),
              nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    cin = 64
    for li, (n, count) in enumerate(zip((64, 128, 256, 512), RESNET200_BLOCKS)):
        for b in range(count):
            stride = 2 if (li > 0 and b == 0) else 1
            preact = not (li == 0 and (b == 0 or not RESNET200_LAYER1_PREACT))
            layers.append(Bottleneck(cin, n, stride, preact))
            cin = 4 * n
    layers += [nn.BatchNorm2d(cin), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(cin, NUM_CLASSES)]
    return nn.Sequential(*layers)


def build_model(name, nn, tv):
    if name == "alexnet":
        return build_alexnet(nn)
    if name == "resnet200":
        return build_resnet200(nn)
    m = tv.models
    if name == "googlenet":
        return m.googlenet(weights=None, aux_logits=False, init_weights=False, num_classes=NUM_CLASSES)
    if name == "inception-v3":
        return m.inception_v3(weights=None, aux_logits=False, init_weights=False, num_classes=NUM_CLASSES)
    return getattr(m, name)(weights=None, num_classes=NUM_CLASSES)


def count_macs(torch, nn, model, size, device, memory_format):
    """Forward MACs per image of convolutions and linear layers, at batch 1."""
    total = [0]

    def conv_hook(mod, inp, out):
        k = mod.kernel_size[0] * mod.kernel_size[1]
        total[0] += out.numel() // out.shape[0] * (mod.in_channels // mod.groups) * k

    def linear_hook(mod, inp, out):
        total[0] += out.numel() // out.shape[0] * mod.in_features

    hooks = []
    for mod in model.modules():
        if isinstance(mod, nn.Conv2d):
            hooks.append(mod.register_forward_hook(conv_hook))
        elif isinstance(mod, nn.Linear):
            hooks.append(mod.register_forward_hook(linear_hook))
    was_training = model.training
    model.eval()
    try:
        x = torch.zeros(1, 3, size, size, device=device).contiguous(memory_format=memory_format)
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    return total[0]


# --------------------------------------------------------------------------
# Options


def parse_args(argv):
    ap = Parser(prog=PROG, description="Time whole-network training steps (forward, backward) with PyTorch.")
    ap.add_argument("models", nargs="*", metavar="MODEL", help=f"{' '.join(MODELS)}, or all")
    ap.add_argument("--batch", type=int, default=16, metavar="N", help="images per step (default 16)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="default cpu")
    ap.add_argument("--dtype", choices=["f32", "tf32", "f16", "bf16"], default="f32",
                    help="default f32; others only on cuda (f16/bf16: autocast mixed precision)")
    ap.add_argument("--layout", choices=["nhwc", "nchw"], default="nhwc",
                    help="nhwc = torch.channels_last (default), nchw = contiguous")
    ap.add_argument("--update", choices=["none", "sgd"], default="none",
                    help="sgd: also time SGD(lr=0.01, momentum=0.9).step() (default none)")
    ap.add_argument("--warmup", type=int, default=None, metavar="N", help="untimed steps first (default 3)")
    ap.add_argument("--iters", type=int, default=None, metavar="N",
                    help="timed steps: alone, exactly N; with --min-time, at least N (default at least 10)")
    ap.add_argument("--min-time", type=float, default=None, metavar="SECS",
                    help="keep timing until this long has been spent (default 1)")
    ap.add_argument("--threads", type=int, default=None, metavar="N", help="torch.set_num_threads(N)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and inputs (default 0)")
    a = ap.parse_args(argv)
    for opt, v, lo in (("--batch", a.batch, 1), ("--warmup", a.warmup, 0), ("--iters", a.iters, 1),
                       ("--threads", a.threads, 1)):
        if v is not None and v < lo:
            ap.error(f"{opt} must be at least {lo}, got {v}")
    if a.min_time is not None and not (a.min_time >= 0 and math.isfinite(a.min_time)):
        ap.error(f"--min-time must be a non-negative number of seconds, got {a.min_time}")
    if not a.models:
        ap.error(f"no models: give one or more of {', '.join(MODELS)}, or all")
    if a.device == "cpu" and a.dtype != "f32":
        ap.error(f"--dtype {a.dtype} needs --device cuda (the CPU runs f32 only)")
    return a


def expand_models(names):
    out = []
    for n in names:
        if n == "all":
            out.extend(MODELS)
        elif n in MODELS:
            out.append(n)
        else:
            raise InputError(f"unknown model '{n}' (known: {', '.join(MODELS)}, or all)")
    return out


# --------------------------------------------------------------------------
# Timing


def is_oom(torch, e):
    if isinstance(e, getattr(torch, "OutOfMemoryError", ())):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


def bench_model(torch, nn, tv, name, a, policy, info):
    """Returns (fwd_ms, bwd_ms, update_ms, total_ms); fills info['params'], info['macs']."""
    import torch.nn.functional as F

    device = torch.device(a.device)
    fmt = torch.channels_last if a.layout == "nhwc" else torch.contiguous_format
    size = INPUT_SIZE[name]
    torch.manual_seed(a.seed)  # weights and dropout masks
    model = build_model(name, nn, tv)
    info["params"] = sum(p.numel() for p in model.parameters())
    model = model.to(device=device, memory_format=fmt)
    info["macs"] = count_macs(torch, nn, model, size, device, fmt)
    model.train()

    gen = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.batch, 3, size, size, generator=gen).to(device).contiguous(memory_format=fmt)
    labels = torch.randint(0, NUM_CLASSES, (a.batch,), generator=gen).to(device)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9) if a.update == "sgd" else None

    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda and a.dtype in ("f16", "bf16"):
        amp = torch.float16 if a.dtype == "f16" else torch.bfloat16
        autocast = lambda: torch.autocast("cuda", dtype=amp)  # noqa: E731
    else:
        autocast = contextlib.nullcontext
    clock = time.perf_counter

    def step():
        for p in params:
            p.grad = None
        sync()
        t0 = clock()
        with autocast():
            logits = model(x)
        loss = F.cross_entropy(logits.float(), labels)  # .float(): no-op unless autocast
        sync()
        t1 = clock()
        loss.backward()
        sync()
        t2 = clock()
        t3 = t2
        if opt is not None:
            opt.step()
            sync()
            t3 = clock()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3

    warmup, min_runs, min_time, max_runs = policy
    for _ in range(warmup):
        step()
    fwd, bwd, upd, tot = [], [], [], []
    start = clock()
    while len(fwd) < max_runs and (len(fwd) < min_runs or clock() - start < min_time):
        f, b, u = step()
        fwd.append(f)
        bwd.append(b)
        upd.append(u)
        tot.append(f + b + u)
    return fwd, bwd, upd, tot


HEADER = ["model", "batch", "device", "dtype", "layout", "params", "macs",
          "fwd_ms_min", "fwd_ms_median", "fwd_ms_max", "fwd_ms_mean", "fwd_ms_stddev",
          "bwd_ms_min", "bwd_ms_median", "bwd_ms_max", "bwd_ms_mean", "bwd_ms_stddev",
          "total_ms_median", "images_per_sec", "runs", "status"]


def main(argv):
    a = parse_args(argv)
    try:
        models = expand_models(a.models)
    except InputError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 2
    policy = run_policy(a.warmup, a.iters, a.min_time)

    try:
        import torch
        import torch.nn as nn
    except ImportError as e:
        sys.stderr.write(f"{PROG}: error: cannot import torch ({e}); run scripts/peers/setup.sh "
                         "and use .venv/bin/python\n")
        return 1
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.stderr.write(f"{PROG}: error: --device cuda: PyTorch sees no CUDA device on this machine\n")
        return 2
    tv = None
    if any(m in NEEDS_TORCHVISION for m in models):
        try:
            import torchvision as tv
        except ImportError as e:
            sys.stderr.write(f"{PROG}: error: cannot import torchvision ({e}); install the release paired "
                             f"with torch {torch.__version__} into .venv with pip install --no-deps\n")
            return 1
    if a.threads is not None:
        torch.set_num_threads(a.threads)

    version = torch.__version__.split("+")[0]
    if a.device == "cuda":
        torch.backends.cudnn.benchmark = True
        tf32 = a.dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        dev_name = torch.cuda.get_device_name()
        where = (f"device {dev_name}, cuDNN {torch.backends.cudnn.version()}, cudnn.benchmark on, "
                 f"TF32 {'on' if tf32 else 'off'}")
        if a.dtype in ("f16", "bf16"):
            where += f", autocast {a.dtype} (fp32 master weights)"
    else:
        dev_name = "cpu"
        mkldnn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
        where = (f"device cpu, mkldnn {'used' if mkldnn else 'NOT used'} (available "
                 f"{torch.backends.mkldnn.is_available()}, enabled {torch.backends.mkldnn.enabled})")
    device_col = f"pytorch-{version} {dev_name}"
    malloc_ok = os.environ.get("MALLOC_MMAP_MAX_") == "0"
    sys.stderr.write(
        f"torch {torch.__version__}" + (f", torchvision {tv.__version__}" if tv else "")
        + f", threads {torch.get_num_threads()}, {where}, dtype {a.dtype}, layout {a.layout}, "
        f"update {a.update}, batch {a.batch}, {len(models)} model(s)"
        + ("" if malloc_ok or a.device == "cuda" else ", MALLOC_MMAP_MAX_=0 not set") + "\n")

    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(HEADER)
    sys.stdout.flush()
    for name in models:
        info = {"params": "", "macs": ""}
        oom = None
        try:
            fwd, bwd, upd, tot = bench_model(torch, nn, tv, name, a, policy, info)
        except Exception as e:  # noqa: BLE001 - only out-of-memory is handled here
            if not is_oom(torch, e):
                raise
            oom = str(e).splitlines()[0] if str(e) else type(e).__name__
        # Free this model's tensors before the next one (the traceback is gone).
        gc.collect()
        if a.device == "cuda":
            torch.cuda.empty_cache()
        head = [name, a.batch, device_col, a.dtype, a.layout, info["params"], info["macs"]]
        if oom is not None:
            out.writerow(head + [""] * 13 + ["OOM"])
        else:
            fmt3 = lambda v: f"{v:.3f}"  # noqa: E731
            med = statistics.median(tot)
            out.writerow(head + [fmt3(v) for v in stats(fwd)] + [fmt3(v) for v in stats(bwd)]
                         + [fmt3(med), f"{a.batch / (med / 1e3):.1f}", len(tot), "ok"])
        sys.stdout.flush()
        size = INPUT_SIZE[name]
        note = f"{PROG}: {name}: input 3x{size}x{size}"
        if info["params"] != "":
            note += f", {info['params']:,} params"
            if name == "resnet200":
                note += (f" (fb.resnet.torch target {RESNET200_TARGET_PARAMS:,}"
                         + (", matches" if info["params"] == RESNET200_TARGET_PARAMS else ", DIFFERS")
                         + "; see RESNET200_* in this script)")
        if info["macs"] != "":
            note += f", {info['macs'] / 1e9:.3f} GMACs/image"
        if oom is not None:
            note += f", out of memory: {oom}"
        elif a.update == "sgd":
            note += f", update_ms median {statistics.median(upd):.3f} (sgd, in total only)"
        sys.stderr.write(note + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        try:
            sys.stdout.flush()
        except Exception:
            pass
        sys.stderr.write(f"{PROG}: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(141)
