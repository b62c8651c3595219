#!/usr/bin/env python3
"""PyTorch peer of `cnnbench model`: times whole-network training steps with PyTorch.

It builds the same networks cnnbench knows, by the same names, runs forward
and backward passes on them with PyTorch, and prints cnnbench's model CSV
columns, so the two can be put side by side. On CPU, PyTorch's convolutions
run on its bundled oneDNN (MKL-DNN); on NVIDIA GPUs, on cuDNN and cuBLAS.

Set up once (creates .venv at the repository root, see setup.sh; it also
installs torchvision, the release paired with the pinned torch, with
`.venv/bin/pip install --no-deps torchvision==<version>`; without it only
googlenet and inception-v3 cannot run, see "Without torchvision" below):

    scripts/peers/setup.sh

Run (the malloc settings keep glibc from returning freed activation buffers
to the OS, so they are not page-faulted in again on every step):

    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776 \\
        .venv/bin/python scripts/peers/pytorch_model.py MODEL [MODEL ...|all]
            [--batch N] [--device cpu|cuda] [--dtype f32|tf32|f16|bf16]
            [--layout nhwc|nchw] [--update none|sgd] [--warmup N] [--iters N]
            [--min-time SECS] [--threads N] [--seed N]
            [--profile [--profile-steps N]]
    .venv/bin/python scripts/peers/pytorch_model.py --check-fallback [MODEL ...]

Models (cnnbench's names; `all` runs every one, in this order):
  alexnet       BVLC/Caffe AlexNet (the one-GPU Caffe model, with grouped
                conv2/4/5, LRN and ceil-mode pooling), 227x227, built here;
                60,965,224 parameters (checked)
  googlenet     torchvision googlenet(aux_logits=False, init_weights=False), 224x224
                (torchvision only)
  inception-v3  torchvision inception_v3(aux_logits=False, init_weights=False), 299x299
                (torchvision only)
  vgg16 vgg19   torchvision, 224x224; 138,357,544 / 143,667,240 parameters
  resnet18 resnet34 resnet50 resnet101 resnet152
                torchvision (v1.5: stride on the 3x3 conv), 224x224;
                11,689,512 / 21,797,672 / 25,557,032 / 44,549,160 / 60,192,808
                parameters
  resnet200     pre-activation bottleneck ResNet, [3, 24, 36, 3] blocks, as in
                fb.resnet.torch models/preresnet.lua, 224x224, built here
                (its reading of the Lua source is set by the RESNET200_*
                constants below)
These have 1000 classes. Then the six Keras examples (keras-team/keras
examples/, each as Keras defines it), built here, each checked against the
trainable-parameter count of Keras's model.summary():
  mnist-mlp     mnist_mlp.py: 784 floats; Dense(512) ReLU Dropout(0.2)
                Dense(512) ReLU Dropout(0.2) Dense(10); 669,706 parameters
  mnist-cnn     mnist_cnn.py: 1x28x28; Conv2D(32, 3x3 valid) ReLU Conv2D(64,
                3x3 valid) ReLU MaxPool 2x2 Dropout(0.25) Flatten Dense(128)
                ReLU Dropout(0.5) Dense(10); 1,199,882 parameters
  cifar10-cnn   cifar10_cnn.py: 3x32x32; Conv2D(32, same) ReLU Conv2D(32,
                valid) ReLU MaxPool Dropout(0.25) Conv2D(64, same) ReLU
                Conv2D(64, valid) ReLU MaxPool Dropout(0.25) Flatten
                Dense(512) ReLU Dropout(0.5) Dense(10); 1,250,858 parameters
  imdb-fasttext imdb_fasttext.py (unigrams): 400 token ids (int64,
                vocabulary 20,000); Embedding(20000, 50), mean over the 400
                steps, Dense(1); 1,000,051 parameters
  imdb-bilstm   imdb_bidirectional_lstm.py: 100 token ids (vocabulary
                20,000); Embedding(20000, 128), bidirectional LSTM(64) (each
                direction's last hidden state h_n, concatenated: 128),
                Dropout(0.5), Dense(1); 2,658,945 parameters
  lstm-text     lstm_text_generation.py: 40 steps of 57 floats (one-hot
                characters in Keras; random values here); LSTM(128) (its last
                hidden state), Dense(57); 102,585 parameters
Keras counts one bias per LSTM gate, PyTorch's nn.LSTM has two (bias_ih and
bias_hh, added): here bias_hh of every direction is zeroed and frozen
(requires_grad False, not updated, not counted in params), so the gates'
bias is bias_ih alone, as in Keras and cnnbench. The LSTM of imdb-bilstm
runs time-major (the int64 ids are transposed, so the embedding writes
(T, batch, 128) and cuDNN takes it as it is); lstm-text's input is batch
first, (batch, 40, 57), with batch_first=True. Flatten takes Keras's (H, W,
C) order when the activations are channels_last (a view there) and PyTorch's
(C, H, W) with --layout nchw (a view there): the weights are random either
way. The softmax (or the sigmoid) of the last layer is in the loss.
All models have random (seeded) weights (PyTorch's default initialization
for the ones built here); torchvision's models are built with weights=None,
so there is no input transform.

Without torchvision. torchvision is used whenever `import torchvision`
succeeds. When it fails (ImportError, or any other exception raised while
importing, such as an operator mismatch with torch), or when the environment
variable CNNBENCH_NO_TORCHVISION is set to anything but "" or "0" (to force
this path where torchvision is installed):
  - the ResNets and VGGs are built by copies of torchvision 0.29's
    definitions in this script (build_resnet_here, build_vgg_here): same
    modules, names and order, forward, parameter count (checked when built)
    and MACs, and the same weight initialization, so with the same torch and
    seed even the initial weights are torchvision's (--check-fallback reports
    it; only timings are taken, so an initialization that drifted from a
    later torchvision would not matter). stderr gets one line per model:
    "torchvision not importable (WHY); building resnet50 in the script";
  - googlenet and inception-v3 are not built: each gets a CSV row with empty
    params, macs, times and runs and status `unavailable` (like an OOM row;
    the other models go on, exit status 0) and one stderr line saying why.
    When every model asked for is one of these two, nothing is timed: one
    line on stderr and exit status 1, as when torch itself cannot be imported.

--check-fallback times nothing: it checks the in-script copies against
torchvision's models, the named ones (default, or `all`: resnet18 resnet34
resnet50 resnet101 resnet152 vgg16 vgg19). Each is built by both from the
same seed (on --device) and compared: parameter count (and the expected one
above), the parameter shapes in order, the state_dict's names and shapes,
the modules' names and classes, the MACs, and then, with torchvision's
weights loaded into the copy, the output shape and values of one eval-mode
forward at batch 1 (max |diff| at most 1e-4 of max |output|); whether the
seeded initial weights are equal is reported too. One line per model and a
summary on stdout; exit 0 if all match, 1 if any differs or torchvision is
not importable (it needs the real torchvision and ignores
CNNBENCH_NO_TORCHVISION). About 75 s on 2 CPU cores for all seven.

What is timed. The model is in train() mode (batch norm normalizes with the
batch's statistics and updates its running averages; dropout is active). For
--layout nhwc (the default) the model and the input are in
torch.channels_last (the 4-d ones: images and convolution weights; the
other inputs and weights have no such format); nchw leaves both contiguous.
The input is one fixed batch, made once from a seeded generator: images
torch.randn(batch, C, H, W), mnist-mlp's torch.randn(batch, 784),
lstm-text's torch.randn(batch, 40, 57), the imdb models' token ids
torch.randint(0, 20000, (batch, T)) (int64); labels torch.randint(0,
classes, (batch,)) (1000, 10 or 57 classes), or for the imdb models' one
sigmoid unit torch.randint(0, 2, (batch, 1)) as floats. Each training step
is:
  untimed   for p in trainable parameters: p.grad = None
  fwd       logits = model(x); loss = F.cross_entropy(logits, labels), or
            F.binary_cross_entropy_with_logits for the imdb models (mean
            over the batch)
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
device name>`; params is the sum of numel() over the model's trainable
parameters (all of them, but the frozen LSTM bias_hh); macs is the forward
multiply-accumulates per image (sample) of the convolutions (output
elements x in_channels/groups x kh x kw), linear layers (in_features x
out_features) and LSTMs (per step and direction 4 x hidden x (input +
hidden)), as cnnbench counts them (embeddings, pooling, losses: 0), counted
with forward hooks during one untimed forward at batch 1 (eval mode,
no_grad); ms columns have 3 decimals, stddev is
the sample standard deviation (n-1), as cnnbench's; total_ms_median is the
median over steps of each step's fwd + bwd (+ update); images_per_sec =
batch / total_ms_median (in seconds), 1 decimal; runs is the number of timed
steps; status is ok, OOM, or unavailable (needs torchvision, see above).

On stderr: one line about torch, torchvision (its version, or why it is not
importable), threads, oneDNN (or the CUDA device and cuDNN) and the dtype;
then one line per model with its input, parameter (and for the Keras models
Keras's count) and MAC counts, and
the median update time with --update sgd (preceded by the "building ... in
the script" line when torchvision is not importable).

--profile: after each model's timed steps, --profile-steps more (default 5)
run under torch.profiler, and three tables go to stderr (the CSV on stdout
is unchanged, and so are its times): the device time per step (CUDA
kernels on cuda, CPU time on cpu) per layer type as cnnbench names them
(conv, bn, relu, add, maxpool, fc, ...; forward, backward and update), the
ops with the most time, and per layer (torchvision's module names), each op
charged by its self time. Beside `cnnbench model --per-layer` they compare
layer for layer and type for type; torch_profile.py says how ops are
charged (a block's residual add and ReLUs go to the block and to its one
`relu` module). Written without torch at hand: its aggregation is tested
(scripts/peers/test_torch_profile.py), the profiler calls have not run yet.

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

IMAGENET_MODELS = ["alexnet", "googlenet", "inception-v3", "vgg16", "vgg19", "resnet18", "resnet34",
                   "resnet50", "resnet101", "resnet152", "resnet200"]
# The six Keras examples (keras-team/keras examples/), in cnnbench's order
# (layers/src/zoo/mod.rs NAMES), built in the script (build_keras).
KERAS_MODELS = ["mnist-mlp", "mnist-cnn", "cifar10-cnn", "imdb-fasttext", "imdb-bilstm", "lstm-text"]
MODELS = IMAGENET_MODELS + KERAS_MODELS
INPUT_SIZE = {m: 224 for m in IMAGENET_MODELS}  # square RGB images, HxW
INPUT_SIZE.update({"alexnet": 227, "inception-v3": 299})
NUM_CLASSES = 1000  # the ImageNet models

# The Keras models' inputs (per sample), as cnnbench feeds them:
#   ("image", C, H, W)  float images, (batch, C, H, W) [channels_last with --layout nhwc]
#   ("flat", N)         N floats, (batch, N)
#   ("ids", T, V)       T token ids (int64) in [0, V), (batch, T)
#   ("seq", T, N)       T steps of N floats, (batch, T, N) (batch first)
KERAS_INPUT = {"mnist-mlp": ("flat", 784), "mnist-cnn": ("image", 1, 28, 28),
               "cifar10-cnn": ("image", 3, 32, 32), "imdb-fasttext": ("ids", 400, 20_000),
               "imdb-bilstm": ("ids", 100, 20_000), "lstm-text": ("seq", 40, 57)}
# Their labels: classes of the softmax cross-entropy, or 1 = one sigmoid unit
# with binary cross-entropy (labels 0.0 / 1.0).
KERAS_CLASSES = {"mnist-mlp": 10, "mnist-cnn": 10, "cifar10-cnn": 10, "imdb-fasttext": 1,
                 "imdb-bilstm": 1, "lstm-text": 57}
# Trainable parameters as Keras's model.summary() counts them (one bias per
# LSTM gate: PyTorch's second bias, bias_hh, is zeroed and frozen), checked
# when built.
KERAS_PARAMS = {"mnist-mlp": 669_706, "mnist-cnn": 1_199_882, "cifar10-cnn": 1_250_858,
                "imdb-fasttext": 1_000_051, "imdb-bilstm": 2_658_945, "lstm-text": 102_585}

# Models torchvision builds when it imports; without it, the in-script copies
# below build them (see build_resnet_here, build_vgg_here).
RESNET_BLOCKS = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet34": ("basic", (3, 4, 6, 3)),
                 "resnet50": ("bottleneck", (3, 4, 6, 3)), "resnet101": ("bottleneck", (3, 4, 23, 3)),
                 "resnet152": ("bottleneck", (3, 8, 36, 3))}
VGG_CFG = {  # torchvision's cfgs "D" and "E": output channels of each 3x3 conv, "M" = 2x2 max pool
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
              512, 512, 512, 512, "M"],
}
# Parameter counts of torchvision's models (1000 classes); the in-script
# copies are checked against these when built.
HERE_PARAMS = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
               "resnet101": 44_549_160, "resnet152": 60_192_808, "vgg16": 138_357_544,
               "vgg19": 143_667_240}
TORCHVISION_ONLY = {"googlenet", "inception-v3"}  # no in-script copy: need torchvision
NEEDS_TORCHVISION = TORCHVISION_ONLY | set(HERE_PARAMS)  # use it when it imports
# Set to anything but "" or "0": behave as if `import torchvision` failed.
NO_TORCHVISION_ENV = "CNNBENCH_NO_TORCHVISION"

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


def build_resnet_here(name, nn):
    """torchvision 0.29's resnet18/34/50/101/152(weights=None), without torchvision.

    A copy of torchvision.models.resnet's ResNet, BasicBlock and Bottleneck for
    the defaults those builders use (ResNet v1.5: the stride is on the
    bottleneck's 3x3 conv; zero_init_residual=False, groups=1, width 64, no
    dilation), with the same module names, construction order, forward and
    weight initialization (kaiming_normal_(fan_out, relu) on every conv, BN
    weight 1 and bias 0, nn.Linear's default for fc). So the parameters, their
    order and shapes, and the MACs are torchvision's, and with the same seed
    the initial weights are too (--check-here checks all of this).
    """
    import torch

    def conv3x3(cin, cout, stride=1):
        return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)

    def conv1x1(cin, cout, stride=1):
        return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv1x1(inplanes, planes)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = conv3x3(planes, planes, stride)  # v1.5: stride here
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = conv1x1(planes, planes * self.expansion)
            self.bn3 = nn.BatchNorm2d(planes * self.expansion)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self, block, layers, num_classes):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, 64, layers[0])
            self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
            self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
            self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * block.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, block, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                           nn.BatchNorm2d(planes * block.expansion))
            layers = [block(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * block.expansion
            layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = torch.flatten(self.avgpool(x), 1)
            return self.fc(x)

    kind, blocks = RESNET_BLOCKS[name]
    return ResNet(BasicBlock if kind == "basic" else Bottleneck, blocks, NUM_CLASSES)


def build_vgg_here(name, nn):
    """torchvision 0.29's vgg16/vgg19(weights=None), without torchvision.

    A copy of torchvision.models.vgg's VGG and make_layers (no batch norm):
    features (3x3 convs with bias, padding 1, each followed by ReLU; 2x2 max
    pools), avgpool AdaptiveAvgPool2d((7, 7)), classifier Linear(25088, 4096)
    ReLU Dropout(0.5) Linear(4096, 4096) ReLU Dropout(0.5) Linear(4096, 1000),
    and init_weights=True's initialization (kaiming_normal_(fan_out, relu) and
    zero bias on convs, normal(0, 0.01) and zero bias on linears).
    """
    import torch

    class VGG(nn.Module):
        def __init__(self, features, num_classes):
            super().__init__()
            self.features = features
            self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
            self.classifier = nn.Sequential(
                nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=0.5),
                nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=0.5),
                nn.Linear(4096, num_classes),
            )
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

        def forward(self, x):
            x = self.avgpool(self.features(x))
            return self.classifier(torch.flatten(x, 1))

    layers, cin = [], 3
    for v in VGG_CFG[name]:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            layers += [nn.Conv2d(cin, v, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            cin = v
    return VGG(nn.Sequential(*layers), NUM_CLASSES)


def build_here(name, nn):
    """The in-script copy of torchvision's `name`, its parameter count checked."""
    model = build_vgg_here(name, nn) if name in VGG_CFG else build_resnet_here(name, nn)
    n = sum(p.numel() for p in model.parameters())
    if n != HERE_PARAMS[name]:
        raise AssertionError(f"in-script {name} has {n} parameters, torchvision's has {HERE_PARAMS[name]}")
    return model


def import_torchvision(honor_env=True):
    """(torchvision module, None), or (None, why it is not importable)."""
    if honor_env and os.environ.get(NO_TORCHVISION_ENV, "") not in ("", "0"):
        return None, f"{NO_TORCHVISION_ENV}={os.environ[NO_TORCHVISION_ENV]}"
    try:
        import torchvision
    except Exception as e:  # noqa: BLE001 - ImportError, or e.g. a torch/torchvision operator mismatch
        msg = str(e).splitlines()[0] if str(e) else ""
        return None, f"{type(e).__name__}: {msg}" if msg else type(e).__name__
    return torchvision, None


def trainable_params(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def keras_lstm(nn, inputs, hidden, bidirectional=False, batch_first=False):
    """nn.LSTM with Keras's one bias per gate: bias_hh (both directions) zeroed and frozen.

    PyTorch adds bias_ih + bias_hh, so a zero bias_hh leaves bias_ih as the
    gates' only bias, as in Keras (and cnnbench); cuDNN takes the two biases
    either way, so the work is the same.
    """
    import torch

    lstm = nn.LSTM(inputs, hidden, batch_first=batch_first, bidirectional=bidirectional)
    for pname, p in lstm.named_parameters():
        if pname.startswith("bias_hh"):
            with torch.no_grad():
                p.zero_()
            p.requires_grad_(False)
    return lstm


def build_keras(name, nn):
    """The Keras examples' models (keras-team/keras examples/), as cnnbench builds them.

    PyTorch's default initialization (the weights are random either way; only
    timings are taken). The softmax or sigmoid of the last layer is in the loss.
    """
    import torch

    relu = lambda: nn.ReLU(inplace=True)  # noqa: E731

    class KerasFlatten(nn.Module):
        # Keras flattens (H, W, C); with channels_last memory that order is a
        # view, with contiguous NCHW the plain (C, H, W) flatten is (the order
        # of random weights does not matter, the copy would).
        def forward(self, x):
            if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
                return x.permute(0, 2, 3, 1).flatten(1)
            return x.flatten(1)

    class FastText(nn.Module):  # imdb_fasttext.py: Embedding -> GlobalAveragePooling1D -> Dense(1)
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(20_000, 50)
            self.dense = nn.Linear(50, 1)

        def forward(self, ids):  # (batch, 400) int64
            return self.dense(self.embedding(ids).mean(dim=1))

    class BiLstm(nn.Module):  # imdb_bidirectional_lstm.py
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(20_000, 128)
            # Time-major: the ids are transposed (a tiny int64 copy) so the
            # embedding writes (T, batch, 128) and cuDNN's LSTM takes it as it
            # is (batch_first=True would transpose the embedded floats).
            self.lstm = keras_lstm(nn, 128, 64, bidirectional=True)
            self.dropout = nn.Dropout(0.5)
            self.dense = nn.Linear(128, 1)

        def forward(self, ids):  # (batch, 100) int64
            _, (h, _) = self.lstm(self.embedding(ids.t()))
            # h: (2, batch, 64), forward then backward: Bidirectional(merge_mode='concat')
            # of the two directions' last outputs.
            return self.dense(self.dropout(torch.cat((h[0], h[1]), dim=1)))

    class TextLstm(nn.Module):  # lstm_text_generation.py: LSTM(128) -> Dense(57)
        def __init__(self):
            super().__init__()
            self.lstm = keras_lstm(nn, 57, 128, batch_first=True)
            self.dense = nn.Linear(128, 57)

        def forward(self, x):  # (batch, 40, 57) floats
            _, (h, _) = self.lstm(x)
            return self.dense(h[0])

    if name == "mnist-mlp":
        model = nn.Sequential(nn.Linear(784, 512), relu(), nn.Dropout(0.2),
                              nn.Linear(512, 512), relu(), nn.Dropout(0.2),
                              nn.Linear(512, 10))
    elif name == "mnist-cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3), relu(),                      # 26x26
                              nn.Conv2d(32, 64, 3), relu(),                     # 24x24
                              nn.MaxPool2d(2), nn.Dropout(0.25), KerasFlatten(),  # 12x12x64
                              nn.Linear(12 * 12 * 64, 128), relu(), nn.Dropout(0.5),
                              nn.Linear(128, 10))
    elif name == "cifar10-cnn":
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), relu(),           # 32x32
                              nn.Conv2d(32, 32, 3), relu(),                     # 30x30
                              nn.MaxPool2d(2), nn.Dropout(0.25),                # 15x15
                              nn.Conv2d(32, 64, 3, padding=1), relu(),          # 15x15
                              nn.Conv2d(64, 64, 3), relu(),                     # 13x13
                              nn.MaxPool2d(2), nn.Dropout(0.25), KerasFlatten(),  # 6x6x64
                              nn.Linear(6 * 6 * 64, 512), relu(), nn.Dropout(0.5),
                              nn.Linear(512, 10))
    elif name == "imdb-fasttext":
        model = FastText()
    elif name == "imdb-bilstm":
        model = BiLstm()
    elif name == "lstm-text":
        model = TextLstm()
    else:
        raise AssertionError(f"not a Keras model: {name}")
    n = trainable_params(model)
    if n != KERAS_PARAMS[name]:
        raise AssertionError(f"{name} has {n} trainable parameters, Keras's has {KERAS_PARAMS[name]}")
    return model


def model_input(torch, name, batch, gen=None):
    """The input batch of `name` on the CPU (gen: a seeded torch.Generator; None: zeros)."""
    if name not in KERAS_INPUT:
        s = INPUT_SIZE[name]
        shape, kind = (batch, 3, s, s), "image"
    else:
        kind, *dims = KERAS_INPUT[name]
        shape = (batch,) + tuple(dims[:2] if kind == "seq" else dims[:1] if kind == "ids" else dims)
    if kind == "ids":
        vocab = KERAS_INPUT[name][2]
        if gen is None:
            return torch.zeros(shape, dtype=torch.int64)
        return torch.randint(0, vocab, shape, generator=gen, dtype=torch.int64)
    return torch.zeros(shape) if gen is None else torch.randn(shape, generator=gen)


def model_labels(torch, name, batch, gen):
    """(labels, binary): class indices, or 0.0/1.0 floats shaped (batch, 1) for one sigmoid unit."""
    classes = KERAS_CLASSES.get(name, NUM_CLASSES)
    if classes == 1:
        return torch.randint(0, 2, (batch, 1), generator=gen).float(), True
    return torch.randint(0, classes, (batch,), generator=gen), False


def describe_input(name):
    if name not in KERAS_INPUT:
        return f"3x{INPUT_SIZE[name]}x{INPUT_SIZE[name]}"
    kind, *d = KERAS_INPUT[name]
    if kind == "image":
        return "x".join(map(str, d))
    if kind == "flat":
        return f"{d[0]} floats"
    if kind == "ids":
        return f"{d[0]} token ids (int64, vocabulary {d[1]:,})"
    return f"{d[0]} steps x {d[1]} floats"


def build_model(name, nn, tv):
    """tv: the torchvision module, or None when it is not importable."""
    if name in KERAS_PARAMS:
        return build_keras(name, nn)
    if name == "alexnet":
        return build_alexnet(nn)
    if name == "resnet200":
        return build_resnet200(nn)
    if tv is None:
        return build_here(name, nn)  # main() says so on stderr; TORCHVISION_ONLY never get here
    m = tv.models
    if name == "googlenet":
        return m.googlenet(weights=None, aux_logits=False, init_weights=False, num_classes=NUM_CLASSES)
    if name == "inception-v3":
        return m.inception_v3(weights=None, aux_logits=False, init_weights=False, num_classes=NUM_CLASSES)
    return getattr(m, name)(weights=None, num_classes=NUM_CLASSES)


def place_input(x, device, memory_format):
    """x on device; images (4-d) in memory_format, other inputs as they are."""
    x = x.to(device)
    return x.contiguous(memory_format=memory_format) if x.dim() == 4 else x


def count_macs(torch, nn, model, name, device, memory_format):
    """Forward MACs per sample of convolutions, linear and recurrent layers, at batch 1.

    cnnbench's convention: a convolution output elements x in_channels/groups
    x kh x kw, a linear layer in_features x out_features (per row of its
    output), an LSTM per step and direction gates x hidden x (input + hidden)
    (4 gates; bias and pointwise work not counted); embeddings, pooling and
    losses 0.
    """
    total = [0]

    def conv_hook(mod, inp, out):
        k = mod.kernel_size[0] * mod.kernel_size[1]
        total[0] += out.numel() // out.shape[0] * (mod.in_channels // mod.groups) * k

    def linear_hook(mod, inp, out):
        total[0] += out.numel() // out.shape[0] * mod.in_features

    def lstm_hook(mod, inp, out):
        steps = inp[0].shape[1 if mod.batch_first else 0]
        dirs = 2 if mod.bidirectional else 1
        h = mod.hidden_size
        for layer in range(mod.num_layers):
            cin = mod.input_size if layer == 0 else dirs * h
            total[0] += steps * dirs * 4 * h * (cin + h)

    hooks = []
    for mod in model.modules():
        if isinstance(mod, nn.Conv2d):
            hooks.append(mod.register_forward_hook(conv_hook))
        elif isinstance(mod, nn.Linear):
            hooks.append(mod.register_forward_hook(linear_hook))
        elif isinstance(mod, nn.LSTM):
            hooks.append(mod.register_forward_hook(lstm_hook))
    was_training = model.training
    model.eval()
    try:
        x = place_input(model_input(torch, name, 1), device, memory_format)
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
    ap.add_argument("--check-fallback", action="store_true",
                    help="time nothing: check the in-script ResNets and VGGs against torchvision's")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed steps, profile more with torch.profiler: device time per layer "
                         "type, op and layer on stderr")
    ap.add_argument("--profile-steps", type=int, default=None, metavar="N",
                    help="steps profiled with --profile (default 5)")
    a = ap.parse_args(argv)
    if a.profile_steps is not None and not a.profile:
        ap.error("--profile-steps needs --profile")
    if a.profile and a.check_fallback:
        ap.error("--profile times steps; --check-fallback times nothing")
    a.profile_steps = 5 if a.profile_steps is None else a.profile_steps
    for opt, v, lo in (("--batch", a.batch, 1), ("--warmup", a.warmup, 0), ("--iters", a.iters, 1),
                       ("--threads", a.threads, 1), ("--profile-steps", a.profile_steps, 1)):
        if v is not None and v < lo:
            ap.error(f"{opt} must be at least {lo}, got {v}")
    if a.min_time is not None and not (a.min_time >= 0 and math.isfinite(a.min_time)):
        ap.error(f"--min-time must be a non-negative number of seconds, got {a.min_time}")
    if not a.models and not a.check_fallback:
        ap.error(f"no models: give one or more of {', '.join(MODELS)}, or all")
    if a.device == "cpu" and a.dtype != "f32":
        ap.error(f"--dtype {a.dtype} needs --device cuda (the CPU runs f32 only)")
    return a


def expand_models(names, known=MODELS):
    out = []
    for n in names:
        if n == "all":
            out.extend(known)
        elif n in known:
            out.append(n)
        else:
            raise InputError(f"unknown model '{n}' (known: {', '.join(known)}, or all)")
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
    torch.manual_seed(a.seed)  # weights and dropout masks
    model = build_model(name, nn, tv)
    model = model.to(device=device, memory_format=fmt)  # the format applies to 4-d weights only
    info["params"] = trainable_params(model)
    info["frozen"] = sum(p.numel() for p in model.parameters()) - info["params"]
    info["macs"] = count_macs(torch, nn, model, name, device, fmt)
    model.train()

    gen = torch.Generator().manual_seed(a.seed)
    x = place_input(model_input(torch, name, a.batch, gen), device, fmt)
    labels, binary = model_labels(torch, name, a.batch, gen)
    labels = labels.to(device)
    loss_fn = F.binary_cross_entropy_with_logits if binary else F.cross_entropy
    params = [p for p in model.parameters() if p.requires_grad]
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
        loss = loss_fn(logits.float(), labels)  # .float(): no-op unless autocast
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
    if a.profile:
        import torch_profile
        events = torch_profile.profile_steps(torch, model, step, a.profile_steps, cuda)
        kinds, ops, layers, order, charged = torch_profile.aggregate(events, a.profile_steps)
        what = "CUDA time" if cuda else "CPU time"
        sys.stderr.write(torch_profile.render(name, what, a.profile_steps, kinds, ops, layers, order, charged))
    return fwd, bwd, upd, tot


def check_fallback(torch, nn, tv, names, a):
    """--check-fallback: the in-script copies against torchvision's models; 0 if all match, else 1.

    Each model is built twice from the same seed, by torchvision and in the
    script, and compared: parameter count (and HERE_PARAMS), the list of
    parameter shapes in order, the state_dict's names and shapes (buffers
    included), the modules' names and class names, MACs (count_macs), and
    whether the seeded initial weights are equal (reported, not required).
    Then torchvision's weights are loaded into the copy (strict) and both run
    one eval-mode forward on the same random batch of 1: the output shapes
    must be equal and the outputs agree (max |diff| <= 1e-4 * max |output|).
    """
    device = torch.device(a.device)
    fmt = torch.contiguous_format
    bad = 0
    for name in names:
        size = INPUT_SIZE[name]
        torch.manual_seed(a.seed)
        ref = build_model(name, nn, tv).to(device)
        torch.manual_seed(a.seed)
        try:
            here = build_model(name, nn, None).to(device)
        except AssertionError as e:
            print(f"{name}: FAIL: {e}", flush=True)
            bad += 1
            continue
        problems = []
        n_ref = sum(p.numel() for p in ref.parameters())
        n_here = sum(p.numel() for p in here.parameters())
        if not n_ref == n_here == HERE_PARAMS[name]:
            problems.append(f"params torchvision {n_ref:,}, script {n_here:,}, "
                            f"expected {HERE_PARAMS[name]:,}")
        shapes = [[tuple(p.shape) for p in m.parameters()] for m in (ref, here)]
        if shapes[0] != shapes[1]:
            i = next((i for i, (x, y) in enumerate(zip(*shapes)) if x != y), min(map(len, shapes)))
            problems.append(f"parameter shapes differ from #{i} "
                            f"({len(shapes[0])} vs {len(shapes[1])} tensors)")
        sds = [m.state_dict() for m in (ref, here)]
        keys = [[(k, tuple(v.shape)) for k, v in sd.items()] for sd in sds]
        same_sd = keys[0] == keys[1]
        if not same_sd:
            problems.append("state_dict names/shapes differ")
        mods = [[(k, type(v).__name__) for k, v in m.named_modules()] for m in (ref, here)]
        if mods[0] != mods[1]:
            problems.append("module names/classes differ")
        init_same = same_sd and all(torch.equal(sds[0][k], sds[1][k]) for k in sds[0])
        macs = [count_macs(torch, nn, m, name, device, fmt) for m in (ref, here)]
        if macs[0] != macs[1]:
            problems.append(f"MACs torchvision {macs[0]:,}, script {macs[1]:,}")
        out_note = ""
        if same_sd:
            here.load_state_dict(sds[0], strict=True)
            ref.eval()
            here.eval()
            x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(a.seed)).to(device)
            with torch.no_grad():
                y_ref, y_here = ref(x), here(x)
            if y_ref.shape != y_here.shape:
                problems.append(f"output shapes {tuple(y_ref.shape)} vs {tuple(y_here.shape)}")
            else:
                diff = (y_ref - y_here).abs().max().item()
                scale = y_ref.abs().max().item()
                if not diff <= 1e-4 * scale:
                    problems.append(f"outputs differ: max |diff| {diff:.3g} (max |output| {scale:.3g})")
                out_note = f", output {tuple(y_ref.shape)} both, max |diff| {diff:.3g} with the same weights"
        status = "ok" if not problems else "FAIL: " + "; ".join(problems)
        bad += bool(problems)
        print(f"{name}: {status}: {n_here:,} params (torchvision {n_ref:,}), {len(shapes[1])} parameter "
              f"tensors, shapes in order {'same' if shapes[0] == shapes[1] else 'DIFFER'}, "
              f"{macs[1] / 1e9:.3f} GMACs (torchvision {macs[0] / 1e9:.3f}){out_note}, "
              f"seeded init {'identical' if init_same else 'differs'}", flush=True)
        del ref, here, sds
        gc.collect()
    print(f"{PROG}: --check-fallback: {len(names) - bad} of {len(names)} match torchvision {tv.__version__} "
          f"(torch {torch.__version__})", flush=True)
    return 1 if bad else 0


HEADER = ["model", "batch", "device", "dtype", "layout", "params", "macs",
          "fwd_ms_min", "fwd_ms_median", "fwd_ms_max", "fwd_ms_mean", "fwd_ms_stddev",
          "bwd_ms_min", "bwd_ms_median", "bwd_ms_max", "bwd_ms_mean", "bwd_ms_stddev",
          "total_ms_median", "images_per_sec", "runs", "status"]


def main(argv):
    a = parse_args(argv)
    try:
        if a.check_fallback:
            models = expand_models(a.models or ["all"], list(HERE_PARAMS))
        else:
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
    install = (f"install the torchvision release paired with torch {torch.__version__} into .venv with "
               "pip install --no-deps (scripts/peers/requirements-nodeps.txt)")
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    if a.check_fallback:  # the reference must be the real torchvision, whatever NO_TORCHVISION_ENV says
        tv, no_tv = import_torchvision(honor_env=False)
        if tv is None:
            sys.stderr.write(f"{PROG}: error: --check-fallback needs torchvision, which is not importable "
                             f"({no_tv}); {install}\n")
            return 1
        return check_fallback(torch, nn, tv, models, a)
    tv = no_tv = None
    if any(m in NEEDS_TORCHVISION for m in models):
        tv, no_tv = import_torchvision()
        if tv is None and all(m in TORCHVISION_ONLY for m in models):
            names = list(dict.fromkeys(models))
            verb = "needs" if len(names) == 1 else "need"
            sys.stderr.write(f"{PROG}: error: {' and '.join(names)} {verb} torchvision, "
                             f"which is not importable ({no_tv}); {install}\n")
            return 1

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
        + (f", torchvision not importable ({no_tv})" if no_tv else "")
        + f", threads {torch.get_num_threads()}, {where}, dtype {a.dtype}, layout {a.layout}, "
        f"update {a.update}, batch {a.batch}, {len(models)} model(s)"
        + ("" if malloc_ok or a.device == "cuda" else ", MALLOC_MMAP_MAX_=0 not set") + "\n")

    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(HEADER)
    sys.stdout.flush()
    for name in models:
        info = {"params": "", "macs": ""}
        head = [name, a.batch, device_col, a.dtype, a.layout, "", ""]
        if tv is None and name in TORCHVISION_ONLY:
            out.writerow(head + [""] * 13 + ["unavailable"])
            sys.stdout.flush()
            sys.stderr.write(f"{PROG}: {name}: unavailable: needs torchvision, which is not importable "
                             f"({no_tv})\n")
            continue
        if tv is None and name in HERE_PARAMS:
            sys.stderr.write(f"{PROG}: torchvision not importable ({no_tv}); building {name} in the script\n")
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
        note = f"{PROG}: {name}: input {describe_input(name)}"
        if info["params"] != "":
            note += f", {info['params']:,} params"
            if name in KERAS_PARAMS:
                note += (f" (trainable; Keras {KERAS_PARAMS[name]:,}"
                         + (", matches" if info["params"] == KERAS_PARAMS[name] else ", DIFFERS")
                         + (f"; plus {info['frozen']:,} frozen zero LSTM bias_hh" if info.get("frozen") else "")
                         + ")")
            if name == "resnet200":
                note += (f" (fb.resnet.torch target {RESNET200_TARGET_PARAMS:,}"
                         + (", matches" if info["params"] == RESNET200_TARGET_PARAMS else ", DIFFERS")
                         + "; see RESNET200_* in this script)")
        if info["macs"] != "":
            note += (f", {info['macs'] / 1e9:.3f} GMACs/image" if info["macs"] >= 10**8
                     else f", {info['macs']:,} MACs/sample")
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
