"""`pytorch_model.py --profile`: where PyTorch's training step spends its device
time, per layer type, per op and per layer, in a form to put beside
`cnnbench model --per-layer`.

After a model's timed steps, `--profile-steps` more steps (default 5) run
under torch.profiler (CUDA and CPU activities on cuda; CPU on cpu). The
timed numbers are not affected. While profiling, every named module's
forward runs inside a `record_function` range named after the module
(`layer:layer1.0.conv1`), so that each op can be charged to a layer.

Each profiled op's *self* device time (its own kernels, not its children's;
on the CPU its self CPU time) is charged, divided by the profiled steps, to:
  - a direction: backward when the op ran inside autograd's engine
    (`autograd::engine::evaluate_function: ...`), update inside the
    optimizer's step, forward otherwise;
  - a layer: forward, the innermost module range around it; backward, the
    module whose forward op created the autograd node it ran in (matched by
    sequence number, as PyTorch's own tools do), else `?`;
  - a layer type named as cnnbench names them (conv, bn, relu, add, maxpool,
    avgpool, fc, loss, dropout, embedding, lstm; `grad-sum` for gradient
    accumulation, `cast` for autocast's copies, `other`), from the op's or
    the autograd node's name.
Self times partition the kernel time, so the tables add up to the profiled
step's device time; the first line says how much of it was charged to a
layer. torchvision's ResNets run the residual add and each block's ReLUs in
the block's forward (one `relu` module called three times), so the add is
charged to the block (`layer1.0`) and the three ReLUs to `layer1.0.relu`.

Three tables go to stderr (stdout keeps the CSV): per layer type (forward,
backward and share of the step, as the README's "where the step goes"
tables sum cnnbench's `--per-layer` rows by type), the ops with the most
device time, and per layer in forward order.

The aggregation below needs no torch (it reads plain event records), so its
tests run anywhere: `python3 scripts/peers/test_torch_profile.py`.
"""

from collections import OrderedDict, defaultdict, namedtuple

RANGE = "layer:"
BACKWARD = "autograd::engine::evaluate_function"
UPDATE = "Optimizer.step"

# An op as the aggregation sees it: its name, its ancestors as (name,
# sequence number) pairs (innermost first), its own device time in
# microseconds (all profiled steps), and its sequence number: an autograd
# node's, or a forward op's that made one (-1 if none).
Event = namedtuple("Event", "name parents self_us seq")

# (substring of an op's or autograd node's name, lower case; cnnbench's
# layer type), first match wins.
KINDS = [
    ("convolution", "conv"), ("conv2d", "conv"), ("cudnn_conv", "conv"),
    ("batchnorm", "bn"), ("batch_norm", "bn"),
    ("threshold", "relu"), ("relu", "relu"), ("clamp", "relu"),
    ("maxpool", "maxpool"), ("max_pool", "maxpool"),
    ("avgpool", "avgpool"), ("avg_pool", "avgpool"), ("meanbackward", "avgpool"), ("aten::mean", "avgpool"),
    ("addmm", "fc"), ("linear", "fc"), ("aten::mm", "fc"), ("mmbackward", "fc"), ("matmul", "fc"),
    ("nll_loss", "loss"), ("nllloss", "loss"), ("log_softmax", "loss"), ("logsoftmax", "loss"),
    ("cross_entropy", "loss"), ("binary_cross_entropy", "loss"), ("binarycrossentropy", "loss"),
    ("dropout", "dropout"), ("bernoulli", "dropout"), ("fused_dropout", "dropout"),
    ("embedding", "embedding"),
    ("lstm", "lstm"), ("rnn", "lstm"),
    ("addbackward", "add"), ("aten::add", "add"),
    ("_to_copy", "cast"), ("aten::copy_", "cast"), ("aten::to", "cast"),
]


def kind_of(names):
    """cnnbench's layer type of the first of `names` (innermost first) that
    matches KINDS, else `other`; anything inside autograd's gradient
    accumulation is `grad-sum`."""
    if any("accumulategrad" in n.lower() for n in names):
        return "grad-sum"
    for n in names:
        low = n.lower()
        if low.startswith(RANGE):
            continue
        for key, kind in KINDS:
            if key in low:
                return kind
    return "other"


def direction_of(parents):
    names = [p[0] for p in parents]
    if any(n.startswith(BACKWARD) for n in names):
        return "bwd"
    if any(n.startswith(UPDATE) for n in names):
        return "update"
    return "fwd"


def innermost_layer(names):
    for n in names:
        if n.startswith(RANGE):
            return n[len(RANGE):]
    return None


def node_seq(ev):
    """The sequence number of the autograd node a backward op ran in: its
    own, or its innermost ancestor's that has one."""
    for _, seq in ((ev.name, ev.seq),) + tuple(ev.parents):
        if seq >= 0:
            return seq
    return -1


def aggregate(events, steps):
    """Per kind, op and layer: {name: [fwd_ms, bwd_ms, update_ms]} per step,
    the layers in forward order, and (charged_ms, total_ms).

    `events` are every profiled op (Event); those without time of their own
    still tell which layer each forward sequence number belongs to."""
    layer_of_seq = {}
    order = OrderedDict()
    for ev in events:
        if direction_of(ev.parents) != "fwd":
            continue
        layer = innermost_layer([ev.name] + [p[0] for p in ev.parents])
        if layer is None:
            continue
        order.setdefault(layer, None)
        if ev.seq >= 0:
            layer_of_seq.setdefault(ev.seq, layer)
    col = {"fwd": 0, "bwd": 1, "update": 2}
    kinds, ops, layers = (defaultdict(lambda: [0.0, 0.0, 0.0]) for _ in range(3))
    total = charged = 0.0
    for ev in events:
        if ev.self_us <= 0:
            continue
        ms = ev.self_us / 1e3 / steps
        d = direction_of(ev.parents)
        names = [ev.name] + [p[0] for p in ev.parents]
        kind = kind_of(names)
        if d == "bwd":
            layer = layer_of_seq.get(node_seq(ev))
        elif d == "fwd":
            layer = innermost_layer(names)
        else:
            layer = None
        total += ms
        kinds[kind][col[d]] += ms
        ops[ev.name][col[d]] += ms
        if layer is not None:
            charged += ms
            layers[layer][col[d]] += ms
    return kinds, ops, layers, list(order), (charged, total)


def table(head, rows):
    """Aligned text: the first column left, the rest right."""
    cells = [head] + rows
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(head))]
    out = []
    for n, r in enumerate(cells):
        out.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def render(model, what, steps, kinds, ops, layers, order, charged_total, top=25):
    """The three tables as text; `what` names the time (`CUDA time`)."""
    charged, total = charged_total
    ms = lambda v: f"{v:.3f}"  # noqa: E731
    share = lambda v: f"{100 * v / total:.1f}" if total > 0 else "-"  # noqa: E731
    s = (f"# {model}: torch.profiler {what} per step (self time of each op, mean of {steps} profiled "
         f"steps): {total:.3f} ms, {charged:.3f} ms of it charged to a layer\n")
    rows = sorted(kinds.items(), key=lambda kv: -sum(kv[1]))
    s += "\n## per layer type\n" + table(
        ["type", "fwd ms", "bwd ms", "update ms", "% step"],
        [[k, ms(v[0]), ms(v[1]), ms(v[2]), share(sum(v))] for k, v in rows])
    rows = sorted(ops.items(), key=lambda kv: -sum(kv[1]))[:top]
    s += f"\n## the {len(rows)} ops with the most time\n" + table(
        ["op", "fwd ms", "bwd ms", "update ms", "% step"],
        [[k[:90], ms(v[0]), ms(v[1]), ms(v[2]), share(sum(v))] for k, v in rows])
    names = [n for n in order if n in layers] + [n for n in layers if n not in order]
    s += "\n## per layer (forward order; torchvision's module names)\n" + table(
        ["layer", "fwd ms", "bwd ms", "% step"],
        [[n, ms(layers[n][0]), ms(layers[n][1]), share(sum(layers[n]))] for n in names])
    return s


# --------------------------------------------------------------------------
# What needs torch


def layer_ranges(torch, model):
    """Forward hooks that run each named module inside a record_function
    range `layer:NAME`; returns the hooks' handles (remove them after)."""
    handles = []
    for name, mod in model.named_modules():
        if not name:
            continue
        stack = []

        def pre(_m, _inp, name=name, stack=stack):
            r = torch.profiler.record_function(RANGE + name)
            r.__enter__()
            stack.append(r)

        def post(_m, _inp, _out, stack=stack):
            if stack:
                stack.pop().__exit__(None, None, None)

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    return handles


def _self_time(e, cuda):
    names = (("self_device_time_total", "self_cuda_time_total") if cuda else ("self_cpu_time_total",))
    for n in names:
        v = getattr(e, n, None)
        if v is not None:
            return float(v)
    return 0.0


def _seq(e):
    seq = getattr(e, "sequence_nr", -1)
    return seq if isinstance(seq, int) else -1


def events_of_profile(prof, cuda):
    """The profiler's CPU-side ops as Events, with their self device time on
    cuda (their self CPU time on the CPU)."""
    events = []
    for e in prof.events():
        dt = getattr(getattr(e, "device_type", None), "name", "CPU")
        if dt != "CPU":
            continue  # kernels themselves: their time is in their op's self time
        parents = []
        p = getattr(e, "cpu_parent", None)
        while p is not None:
            parents.append((p.name, _seq(p)))
            p = getattr(p, "cpu_parent", None)
        events.append(Event(e.name, tuple(parents), _self_time(e, cuda), _seq(e)))
    return events


def profile_steps(torch, model, step, steps, cuda):
    """Runs `step` `steps` times under torch.profiler with the layer ranges
    on; returns the Events."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    handles = layer_ranges(torch, model)
    try:
        with profile(activities=acts) as prof:
            for _ in range(steps):
                step()
            if cuda:
                torch.cuda.synchronize()
    finally:
        for h in handles:
            h.remove()
    return events_of_profile(prof, cuda)
