#!/usr/bin/env bash
# GPU verification, for a GPU machine that is lent now and then and has
# Python with PyTorch, pip's NVIDIA libraries and compute-sanitizer, but no
# Rust: build with scripts/gpu/pack.sh elsewhere, copy gpu-pack/ with the
# checkout, then run one command there:
#
#   scripts/gpu/verify.sh quick OUTDIR         the short one (issue 27): at most 6 minutes
#   scripts/gpu/verify.sh paths OUTDIR         issue 28's optional GPU paths: at most 6 minutes
#   scripts/gpu/verify.sh PART OUTDIR          PART: 1, 2, 3 or 4 (issue 13): the long parts
#
# Every form runs each step under `timeout`, starts none after a time
# budget, and leaves at most 4 files in OUTDIR: NAME-summary.md (markdown
# for the README, ending with a closing note), NAME-logs.tar.gz (every
# command line, log, JSON, CSV and results-store file) and one or two key
# files (NAME: quick or partN). They are rewritten after every step, so a
# run stopped half-way still returns what it did.
#
# quick (the GPU machine now comes for 15 device-minutes in all, about 30 s
# to start each command, 10 minutes and 8 returned files a command): what
# the first GPU run's four commands did (../shared/gpu-runs/2026-11-26-h200,
# run1-3.sh), in one command of at most 6 minutes (BUDGET_S=330 after which
# no step starts, GRACE_S=25 by which a running step is cut), in this order
# (a word of QUICK_STEPS, default all of them, names each part):
#   check     side by side (the CPU references are the cost; none of these
#             is a timing), at most JOBS=8 processes at once: the layers
#             crate's GPU tests (backend_tests real_libs cuda_programs
#             backend::cuda ::cuda net::gpu, --test-threads=2) with
#             CNNBENCH_GPU_LIBS=required CNNBENCH_GPU=required; `conv --from
#             builtin:resnet50 --batch 2 --check` in f16 NHWC and f32 NCHW;
#             `check --device gpu --batch 2 --dtype bf16` on resnet50,
#             alexnet and googlenet; compute-sanitizer with its default
#             options (only --error-exitcode 1): memcheck over one resnet18
#             training step at batch 8, and memcheck, racecheck, initcheck
#             and synccheck over `conv mb4ic32ih28oc64oh28kh3ph1 --dir all
#             --algo all --check` in f16 NHWC and f32 NCHW. PyTorch is
#             imported meanwhile (its versions; a warm file cache for the
#             first timed PyTorch run).
#   nccl      `allreduce --dtype f32,bf16` (every size and placement must say
#             ok), then `model resnet50 --gpus 1 --batch 64 --dtype f16` (the
#             data-parallel step at world size 1 beside the plain step).
#   r50       ResNet-50 training steps (NHWC, --warmup 5 --iters 20) beside
#             scripts/peers/pytorch_model.py in ABBA order (cnnbench,
#             PyTorch, PyTorch, cnnbench), per batch:dtype group of
#             QUICK_GROUPS="256:f16 256:bf16 128:tf32 64:f32": the first group
#             here, the others after `compare`.
#   per-layer `model resnet50 --per-layer` at f16, batch 256 (--iters 10).
#   lstm      DeepBench's 22 LSTM training problems, f16, `rnn --algo
#             standard --dir all` beside scripts/peers/pytorch_rnn.py, ABBA.
#   keras     the six Keras models at batch 128, f32, beside
#             pytorch_model.py, ABBA (one process per tool and round).
#   compare   only when pip's cuDNN folder (nvidia/cudnn/lib) and
#             CUDNN_SYSTEM_DIR (default /usr/lib/x86_64-linux-gnu) both hold
#             libcudnn.so.9: `compare --cudnn PIP --cudnn SYSTEM -- model
#             resnet50 --dtype f16 --batch 256 --iters 10` and the same for
#             `conv` on five resnet50 layers at batch 256 (compare-layers.txt
#             in the logs).
#   sanitize  last, when 25 s are left: racecheck, initcheck and synccheck
#             over the resnet18 step, side by side (a run the budget cuts is
#             reported as skipped, not failed; part 1 runs all four tools
#             over the step and both convolutions without a budget this
#             tight).
# A group, the LSTM pair or the Keras pair starts only when the time left
# covers it (the longest group so far; about 50 s before the first); what
# was skipped is listed with the command that runs just that, e.g.
# QUICK_STEPS="r50 sanitize" QUICK_GROUPS="128:tf32 64:f32".
# Estimate (from run1-3's steps.txt on an H200, plus guesses where marked):
# info text and JSON 10 s; the check wave about 30 s (alone: conv checks
# 16 s, model checks 17 s, tests 8-11 s, memcheck of the step 8-9 s, of a
# conv 1 s; the other three tools guessed at a few seconds each); nccl 10 s;
# a ResNet-50 group 50-80 s (cnnbench 5-17 s a run, PyTorch 13-26 s: its
# start and cudnn.benchmark are the cost, not the 25 steps); per-layer 12 s;
# lstm 40 s (10 s a run); keras 16 s (2 s and 6 s); compare guessed at 35 s.
# All of it is about 7 minutes, so on a first call the budget usually skips
# the last one or two ResNet-50 groups (and `sanitize` if the rest runs
# long): run them with a second call (the closing note gives it; about 2.5
# minutes). Replayed on a CPU machine with stand-ins that only sleep for
# run1-3's step times (9 s for each sanitizer run of the step), quick took
# 314 s and skipped the tf32 and f32 groups. Without a GPU (here),
# info runs, every GPU step is reported as `skipped: no GPU`, and it exits 0
# in a few seconds.
# Files: quick-summary.md (machine, steps with status and seconds, the
# ResNet-50 table `dtype | layout | batch | cnnbench ms | PyTorch ms | img/s
# | PyTorch ms / cnnbench ms` of ABBA medians, where the f16 step goes, the
# LSTM and Keras ratios, compute-sanitizer's summary lines, NCCL, the cuDNN
# comparison, the libraries cnnbench loaded, and a closing note),
# quick-logs.tar.gz, quick-info.json.
#
# paths (issue 28; same budget as quick): the optional GPU paths, each off
# by default until a run like this shows it correct and faster:
# own-kernels (--own-kernels), fuse-bn (--fuse-bn), cuda-graph
# (--cuda-graph), api-graph (--api graph), api-auto (--api auto: per
# layer the faster of the two APIs), fuse-bn-relu (--fuse-bn=relu: the
# batch norms take their ReLUs, not the adds), all (--own-kernels
# --fuse-bn --cuda-graph --api auto --rnn-algo auto) and all-bnrelu (the
# same with --fuse-bn=relu, where the own add takes its ReLU), own-bn
# (--own-bn --fuse-bn: batch norm on the own kernels, taking its ReLU and
# add in every dtype and layout), own-bn-plain (--own-bn), rnn-auto
# (--rnn-algo auto: per recurrent layer the fastest of cuDNN's algorithms),
# rnn-small-h (--rnn-algo persist-static-small-h, checked: auto may not
# pick it), all-own (all with --own-bn) and all-own-parts (all with
# --own-bn=parts: the batch norms that take a block's add read its output's
# two gradient parts themselves), deterministic (--deterministic --api
# auto: the convolutions on algorithms and engines cuDNN marks
# deterministic, on both APIs; checked, not timed); per-layer runs leave
# out --cuda-graph, which refuses --per-layer. A word of
# PATHS_STEPS (default "check r50 per-layer keras"; f32, conv, normconv and
# goal on request) names each part; they run in the order check, goal, r50,
# per-layer's first part, keras, per-layer's second part, f32, conv,
# normconv:
#   check     side by side, at most JOBS=8 at once: the layers crate's GPU
#             tests (backend_tests runs every body on each path and on all
#             of them); `check --device gpu --batch 2` on resnet50,
#             mnist-cnn, imdb-fasttext and (NHWC only: its recurrent
#             layers refuse NCHW) imdb-bilstm with each path and
#             with all, in f16 NHWC and f32 NCHW, and with all and all-own
#             in bf16 and tf32 NHWC (resnet50); `conv --from builtin:resnet50
#             --batch 2 --check --api graph` in f16 NHWC, f32 NCHW and
#             tf32 NCHW;
#             compute-sanitizer memcheck over one resnet18 step at batch 8
#             with all paths, and with all-own.
#   r50       ResNet-50 f16 NHWC batch 256 (--warmup 5 --iters 20): the
#             default step, all-own, all and PyTorch in ABBA order
#             (default, all-own, all, PyTorch, PyTorch, all, all-own,
#             default); then each path of PATHS_SINGLES (default:
#             all-own-parts, the fastest at 43e48bb, then those the run of 56f71b5 did not time:
#             own-bn own-bn-plain all-bnrelu api-auto fuse-bn-relu) alone, forward then
#             reverse order, while the budget lasts, keeping what the
#             later steps need.
#   keras     the six Keras models at batch 128, f32: default,
#             --cuda-graph, all, PyTorch, PyTorch, all, --cuda-graph,
#             default.
#   f32       ResNet-50 f32 batch 64: --api legacy against --api auto, ABBA.
#   per-layer first part: info's measured device copy against the
#             nominal bandwidth (60-102%); `model resnet50 --per-layer` at
#             f16, batch 256 (--iters 10), default and with --own-kernels
#             --own-bn=parts --fuse-bn --api auto: the bytes, GB/s and roofline
#             columns of each layer; imdb-fasttext at batch 128 f32 per
#             layer with --own-kernels (its global average pooling);
#             imdb-bilstm at batch 128 f32 per layer with and without
#             --rnn-algo auto. Second part (after keras, with what the
#             budget leaves): ResNet-50 with --own-kernels --fuse-bn --api
#             auto, imdb-fasttext without --own-kernels (both measured
#             at 56f71b5), then pytorch_model.py --profile on the same
#             imdb-bilstm and ResNet-50 steps (per-op device time).
#   goal      not in the default list (a call of its own, PATHS_STEPS=goal):
#             issue 28's goal table past f16 NHWC, ResNet-50 with
#             all-own-parts, the fastest path at 43e48bb (or GOAL_PATH,
#             e.g. all) beside PyTorch in ABBA order
#             for GOAL_GROUPS (default
#             "256:bf16:nhwc 128:tf32:nhwc 64:f32:nhwc 256:f16:nchw",
#             batch:dtype:layout), each group about 70 s.
#   conv      `conv --from builtin:resnet50 --batch 64 --dtype f32 --dir
#             FWD_D,BWD_D,BWD_W`, --api legacy then --api graph: the engine
#             each direction of each layer gets.
#   normconv  not in the default list: `conv --norm-conv --dir all`
#             (NormConv's runtime-fused graphs, not yet in the network) on
#             the nine layers of normconv-layers.txt, checked at batch 2
#             in f16 and bf16, then timed at batch 256 beside the plain convolutions
#             on the graph API (runtime fusion compiles each configuration
#             it plans, 27 graphs per batch size: 64 s in all on the H200,
#             where cuDNN 9.19 refuses the data gradient and bf16 at once);
#             the checks log cuDNN's level-2 warnings (why an engine
#             refuses a graph).
# Files: paths-summary.md (the correctness rows, the ResNet-50 and Keras
# tables with ratios to the default and to PyTorch, the per-layer kind
# table of both per-layer runs), paths-logs.tar.gz, paths-info.json.
#
# The long parts, for a machine lent for longer (each meant to take under 8
# minutes on an H100 with 16 cores):
#
# Part 1 (about 2-5 min; runs without a GPU too, and then exits 0 with the
# GPU cases reported as `skipped: no GPU`):
#   - `cnnbench info`, text and JSON (part1-info.txt, part1-info.json);
#   - the GPU tests of the layers crate's test binary (backend_tests,
#     real_libs, cuda_programs, backend::cuda, the ops' cuda modules,
#     net::gpu; --test-threads=1 --nocapture) with CNNBENCH_GPU_LIBS=required
#     and CNNBENCH_GPU=required
#     where a GPU is usable (a missing library fails), without it elsewhere;
#     then every packed test binary in full;
#   - compute-sanitizer with its default options (only --error-exitcode 1):
#     memcheck, racecheck, initcheck and synccheck, each over one resnet18
#     training step at batch 8 on the GPU and over `conv --algo all --check`
#     on one small problem in f32 NCHW and f16 NHWC; their summary lines;
#   - NCCL: `allreduce` over the GPUs here (f32, bf16), `model resnet50
#     --gpus 1` (the data-parallel step at world size 1 beside the plain
#     step: its efficiency is their ratio) and a torchrun-style rank of a
#     world of 1 (`model resnet18 --launcher torchrun`).
# Part 2 (estimate 3-5 min): convolutions and GEMMs (the former check.sh).
#   - `conv --check` on builtin:resnet50 and scripts/gpu/odd.txt for
#     f32/tf32/f16/bf16 x NHWC/NCHW, `--algo all --check` on two layers (f32,
#     f16), GEMM --check on 1760x128x1760 and 1024^3 (4 dtypes): 24 runs,
#     JOBS=8 at a time with CHECK_THREADS=2 threads each, since the CPU
#     reference is the cost; their GPU times, taken beside other processes,
#     are not timings. The resnet50 checks run at CHECK_BATCH=2 (`conv
#     --batch` replaces the list's mb16). Why: the reference
#     (kernels/src/conv/reference.rs: f64, rayon) splits bwd-data over
#     images only, so one image costs the same wall time at any batch.
#     Measured on this project's 2-vCPU AMD EPYC VM with `conv --from
#     builtin:resnet50 --device cpu --algo ref --batch 1 --threads 1`: 10.2 s
#     fwd + 25.8-27.0 s bwd-data + 2.6 s bwd-filter = 39-40 s per image. At
#     batch 16: 8 runs x 16 images x 39 s = about 5000 core-s, over 5 min on
#     16 cores, and no run under 26 s. At batch 2: `conv --from
#     builtin:resnet50 --batch 2 --threads 2 --device cpu --algo direct
#     --check --dir FWD_D,BWD_D,BWD_W` took 43.7 s (86 core-s), so 8 runs
#     are about 700 core-s, 45-60 s side by side on 16 cores. odd.txt with
#     --check: 15 core-s a run; GEMM 1024^3 --check: 7.5 core-s; the whole
#     wave: about 1-2 min.
#   - then alone on the GPU, without --check: resnet50 at its batch 16 with
#     --algo auto (cnnbench's time against cuDNN's FindEx, best algorithm
#     per layer) per dtype x layout, `--algo all` on the two layers in f32
#     and f16, GEMMs 8192^3, 4096^3 and 1760x128x1760 per dtype (8192^3 is
#     not checked: its naive f64 reference, 0.07 GMAC/s a thread here, would
#     take 550 GMACs / (16 x 0.07) = about 8 min). Estimate 1.5-3 min
#     (FindEx, process starts; the GPU work itself is seconds); not measured.
# Part 3 (estimate 6-8 min; a time budget skips what does not fit):
#   - `check --device gpu --batch 2` (each GPU layer against the CPU's fast
#     layers, not the naive reference): every model in CHECK_FULL="f32 f16"
#     (the names `cnnbench model` knows: the 11 ImageNet models and, since
#     they were added, the six Keras examples, which cost next to nothing
#     here; in two processes of about half the models each, so a process cut
#     short loses half), the models of CHECK_SUBSET="alexnet googlenet
#     resnet50" in CHECK_PART="tf32 bf16" (LRN, groups, concat, ceil-mode
#     pools, residual adds): six processes at once, 16/6 threads each, cut
#     at CHECK_TIMEOUT=240 s. CPU side, measured on the 2-vCPU VM with
#     `model all --batch 2 --device cpu --iters 1 --warmup 0` (its first step
#     autotunes the convolutions, as check's CPU net does): 166-172 s,
#     272-288 core-s, i.e. about 20-40 s per dtype on 16 cores; the subset:
#     55 core-s. GPU side: one cuDNN FindEx per convolution and direction
#     (756 convolutions in the 11 models; no cache per shape), not measured:
#     guessed at 0.5-2 min per all-model dtype. All four dtypes on every
#     model would be about 1100 core-s plus twice the FindEx work: with the
#     model timings that does not fit in 8 minutes. (`check --device cpu`,
#     the naive reference, costs far more: alexnet 22 s / 35 core-s,
#     resnet50 135 s / 204 core-s at batch 2.)
#   - MODEL=resnet50 training steps, NHWC, cnnbench (--per-layer, results
#     store in the logs) beside scripts/peers/pytorch_model.py (cuda,
#     cudnn.benchmark, channels_last, autocast for f16/bf16) in ABBA order
#     (cnnbench, PyTorch, PyTorch, cnnbench), --warmup 3 --iters 20 each, for
#     the batch:dtype groups of MODEL_GROUPS (default: 256:f16 256:f32
#     64:f16 64:f32 256:bf16 256:tf32 64:bf16 64:tf32, in that order). A
#     group starts only if the time left covers the longest group so far
#     (60 s before the first); the summary names the groups skipped and the
#     command that runs them (SKIP_CHECK=1 MODEL_GROUPS="...").
#     A group is guessed at 40-120 s (two cnnbench runs with FindEx on 53
#     convolutions, two PyTorch starts with cudnn.benchmark, 2 x 23 steps
#     each), so about 3-6 groups fit after the checks.
# Part 4 (estimate 4-7 min, mostly guessed; the budget skips what does not
# fit): recurrent layers (cuDNN RNN v8) and the six Keras examples.
#   - Side by side, as part 3's checks (SKIP_CHECK=1 skips them): `rnn
#     --check --algo all --dir all` per dtype of RNN_DTYPES="f32 tf32 f16
#     bf16" on rnn-check.txt (written to the logs: every cell x left2right,
#     bidirectional-concat x RNN_CHECK_PROBLEMS="l2t5mb4sic16
#     l1t7mb3sic24slc16 l1t10mb32sic128", 24 problems, 4 algorithms x 3
#     passes); a dtype passes when the run exits 0, every check passes and
#     `standard` ran every pass; the algorithms cuDNN refuses (one stderr
#     line each) are listed. And `check --device gpu --batch 2 --layout
#     nhwc` on the six Keras models per dtype of KERAS_CHECK="f32 f16 tf32
#     bf16". CPU side measured here: the six models' step at batch 2 on one
#     thread takes 0.5 s in all, the f64 RNN reference of such problems
#     milliseconds; GPU side guessed at 20-60 s per process (engine set-up
#     per problem x algorithm: 96 of them per RNN dtype), all 8 at once.
#   - DeepBench's 22 LSTM training problems (the `--cell=lstm` lines of
#     src/problem/lists/deepbench_rnn_training.txt, copied into
#     deepbench-lstm.txt) with `rnn --algo standard --dir all` beside
#     scripts/peers/pytorch_rnn.py --device cuda (the same dtype: f32 with
#     TF32 off, f16 in half), ABBA, --warmup 3 --iters 10 each, per dtype
#     of RNN_PEER_DTYPES="f32 f16" (tf32 too: pytorch_rnn.py --dtype takes
#     f32, tf32, f16). Work: 2.26 TFLOP per pass over the 22
#     problems (2 x t x mb x 4 x h x 2h each), 3 passes x 13 runs = 88
#     TFLOP a run; at a guessed 20-40 TFLOP/s for cuDNN's fp32 FMA LSTM on
#     an H100 (its fp32 peak: 67) that is 2-5 s of GPU a run, f16 less;
#     with the process starts (PyTorch's import and CUDA set-up, guessed at
#     5-10 s) a dtype is guessed at 30-60 s.
#   - The Keras models' training steps (`model NAME --per-layer --format
#     csv`, NHWC, --warmup 5 --iters 50) beside scripts/peers/pytorch_model.py
#     --device cuda, ABBA, per batch:dtype group of KERAS_GROUPS="128:f32
#     32:f32 128:f16 32:f16", each group the models of KERAS_MODELS (NAME:
#     BATCH, default their Keras batch sizes: mnist-mlp:128 mnist-cnn:128
#     cifar10-cnn:32 imdb-fasttext:32 imdb-bilstm:32 lstm-text:128) at that
#     batch: cnnbench one process per model, PyTorch one per group (its
#     start is the cost). A model pytorch_model.py does not know is
#     recorded as skipped. Guessed at 30-60 s a group (three cnnbench runs
#     of a few seconds each, twice, two PyTorch starts; the models' steps
#     are milliseconds). A group, or a DeepBench dtype, starts only when
#     the time left covers the longest so far (60 s before the first).
#   Files: part4-summary.md, part4-logs.tar.gz, part4-deepbench-lstm.md
#   (the DeepBench tables) and part4-per-layer.md.
#
# Environment: PACK (default gpu-pack; without it, target/release/cnnbench
# and target/release/deps), CNNBENCH (the binary), PYTHON (default python3),
# BUDGET_S (seconds after which no step starts, default 400, quick 330; a
# step is cut at most GRACE_S=45 s later, quick 25 s, so a part ends within
# 8 min and quick within 6), QUICK_STEPS, QUICK_GROUPS, CUDNN_SYSTEM_DIR
# (quick), JOBS, CHECK_THREADS, CHECK_BATCH,
# CHECK_TIMEOUT (parts 3 and 4, default 240), CHECK_FULL, CHECK_PART,
# CHECK_SUBSET, SKIP_CHECK=1 (parts 3 and 4), MODEL, MODEL_GROUPS; part 4:
# RNN_DTYPES, RNN_CHECK_PROBLEMS, RNN_PEER_DTYPES, KERAS_CHECK,
# KERAS_MODELS, KERAS_GROUPS.
# Exit status: 0 when every step that ran passed (skipped steps are named in
# the summary), 1 when one failed or timed out (or nvidia-smi lists a GPU
# that cnnbench cannot use), 2 when part 2, 3 or 4 finds no usable GPU
# (nothing run; quick and part 1 exit 0 then), 64 on bad usage.
# shellcheck source-path=SCRIPTDIR
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
usage() {
    echo "usage: scripts/gpu/verify.sh quick|paths|1|2|3|4 OUTDIR    (see the header of this script)" >&2
    exit 64
}
[ $# -eq 2 ] || usage
part=$1
out=$2
# tag: the files' prefix; label: the name in messages.
case $part in
    quick) tag=quick label=quick ;;
    paths) tag=paths label=paths ;;
    1 | 2 | 3 | 4) tag=part$part label="part $part" ;;
    *) usage ;;
esac

pack=${PACK:-$root/gpu-pack}
py=${PYTHON:-python3}
if [ "$part" = quick ] || [ "$part" = paths ]; then
    budget=${BUDGET_S:-330}
    grace=${GRACE_S:-25}
else
    budget=${BUDGET_S:-400}
    grace=${GRACE_S:-45}
fi
ncpu=$(nproc 2> /dev/null || echo 4)
t_start=$SECONDS
deadline=$((t_start + budget))

if [ -n "${CNNBENCH:-}" ]; then
    bin=$CNNBENCH
elif [ -x "$pack/cnnbench" ]; then
    bin=$pack/cnnbench
else
    bin=$root/target/release/cnnbench
fi
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
if [ ! -x "$bin" ]; then
    echo "verify.sh: no cnnbench binary: run scripts/gpu/pack.sh (or cargo build --release) first, or set CNNBENCH" >&2
    exit 1
fi

mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
rm -f "$out/$tag-"* "$out/.$tag-"*
work=$(mktemp -d "${TMPDIR:-/tmp}/cnnbench-verify.XXXXXX") || exit 1
logs=$work/$tag-logs
mkdir -p "$logs"
steps=$logs/steps.tsv
: > "$steps"
status=0

# --------------------------------------------------------------------------
# Steps, the time budget, and the files that come back.

say() { echo "verify.sh: $*" >&2; }
left() { echo $((deadline - SECONDS)); }
# record NAME STATUS SECONDS [DETAIL]: one line of steps.tsv.
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$steps"
    say "$1: $2 ($3 s)${4:+; $4}"
    case $2 in ok | skipped*) ;; *) status=1 ;; esac
}
rc_status() { # RC CAP
    case $1 in
        0) echo ok ;;
        124 | 137) echo "timed out after $2 s" ;;
        *) echo "exit $1" ;;
    esac
}
# rerun_hint: quick's QUICK_STEPS word (and group) of the steps now running,
# named in the record of one the budget skips.
rerun_hint=""
# run NAME NEED CAP CMD...: runs CMD (stdout NAME.out, stderr NAME.err in the
# logs) when at least NEED seconds of the budget are left, for at most CAP
# seconds (less when the budget ends sooner). Returns CMD's status, or 3 when
# skipped.
run() {
    local name=$1 need=$2 cap=$3 l t t0 rc
    shift 3
    l=$(left)
    if [ "$l" -lt "$need" ]; then
        record "$name" "skipped: time budget ($l s left, about $need s needed)" 0 "${rerun_hint:+rerun: $rerun_hint}"
        return 3
    fi
    t=$cap
    [ "$t" -gt $((l + grace)) ] && t=$((l + grace))
    # Past the grace too (a step with no need of its own, after one the
    # grace let run long): `timeout 0` would not stop it at all.
    if [ "$t" -lt 5 ]; then
        record "$name" "skipped: time budget ($l s left)" 0 "${rerun_hint:+rerun: $rerun_hint}"
        return 3
    fi
    t0=$SECONDS
    echo "$*" > "$logs/$name.cmd"
    # In the background, so that a TERM to this script is handled at once
    # (the trap stops the job: timeout passes the signal on).
    timeout -k 15 "$t" "$@" > "$logs/$name.out" 2> "$logs/$name.err" &
    wait $!
    rc=$?
    record "$name" "$(rc_status "$rc" "$t")" $((SECONDS - t0))
    checkpoint
    return $rc
}
# bg NAME CAP CMD...: as run, in the background, at most $maxjobs at a time;
# `bg_wait` waits for all of them and records them.
bg_names=""
bg() {
    local name=$1 cap=$2 l
    shift 2
    # Wait for a slot first: the budget is what is left when the job
    # starts, not when it was queued.
    while [ "$(jobs -rp | wc -l)" -ge "$maxjobs" ]; do
        wait -n 2> /dev/null || sleep 1
    done
    l=$(left)
    if [ "$l" -lt 5 ]; then
        record "$name" "skipped: time budget ($l s left)" 0 "${rerun_hint:+rerun: $rerun_hint}"
        return 3
    fi
    [ "$cap" -gt $((l + grace)) ] && cap=$((l + grace))
    echo "$*" > "$logs/$name.cmd"
    (
        t0=$SECONDS
        timeout -k 15 "$cap" "$@" > "$logs/$name.out" 2> "$logs/$name.err" &
        tpid=$!
        trap 'kill -TERM "$tpid" 2> /dev/null' INT TERM
        wait "$tpid"
        rc=$?
        printf '%s\t%s\t%s\n' "$name" "$(rc_status "$rc" "$cap")" $((SECONDS - t0)) > "$logs/$name.rc"
    ) &
    bg_names="$bg_names $name"
}
# bg_cut: when set, a job that timed out is recorded as skipped (the budget
# cut it) with this text as its detail, rather than as a failure.
bg_cut=""
bg_wait() {
    local n st secs
    wait
    for n in $bg_names; do
        if [ -f "$logs/$n.rc" ]; then
            IFS=$'\t' read -r _ st secs < "$logs/$n.rc"
            rm -f "$logs/$n.rc"
            if [ -n "$bg_cut" ] && [ "${st#timed out}" != "$st" ]; then
                record "$n" "skipped: cut by the time budget ($st)" "$secs" "$bg_cut"
                continue
            fi
            record "$n" "$st" "$secs" "in parallel"
        else
            record "$n" "no status (killed?)" 0
        fi
    done
    bg_names=""
    checkpoint
}
# The summary and the archive, rewritten after every step; key files beside.
case $part in
    quick | paths) key_files="info.json" ;;
    1) key_files="info.txt info.json" ;;
    2) key_files="r50-algos.md" ;;
    3) key_files="per-layer.md" ;;
    4) key_files="deepbench-lstm.md per-layer.md" ;;
esac
# summary_cmd: the command that prints the summary (part 4's is below,
# written into the work folder: it reuses summary.py).
summary_cmd=("$py" "$here/summary.py" --part "$part" "$logs")
[ "$part" = 4 ] && summary_cmd=("$py" "$work/summary4.py" "$here" "$logs")
# elapsed.txt: the seconds so far, the budget and grace, and `finished` at the end.
checkpoint() {
    local f
    echo "$((SECONDS - t_start)) $budget $grace ${1:-running}" > "$logs/elapsed.txt"
    if command -v "$py" > /dev/null 2>&1 \
        && "${summary_cmd[@]}" > "$out/.$tag-summary.md" 2>> "$logs/summary.err"; then
        :
    else
        { # No Python: the steps alone.
            echo "# cnnbench GPU verification, $label"
            echo
            echo "(summary.py failed or Python is missing: see summary.err in the logs)"
            echo
            echo "| step | result | s |"
            echo "|---|---|---:|"
            while IFS=$'\t' read -r n st secs _; do echo "| $n | $st | $secs |"; done < "$steps"
        } > "$out/.$tag-summary.md"
    fi
    mv -f "$out/.$tag-summary.md" "$out/$tag-summary.md"
    cp -f "$out/$tag-summary.md" "$logs/summary.md"
    for f in $key_files; do
        [ -f "$logs/$f" ] && cp -f "$logs/$f" "$out/$tag-$f"
    done
    tar -czf "$out/.$tag-logs.tar.gz" -C "$work" "$tag-logs" 2> /dev/null \
        && mv -f "$out/.$tag-logs.tar.gz" "$out/$tag-logs.tar.gz"
}
finish() {
    checkpoint finished
    rm -rf "$work"
    say "$label done in $((SECONDS - t_start)) s: $out/$tag-summary.md, $out/$tag-logs.tar.gz (exit $status)"
    exit "$status"
}
# shellcheck disable=SC2046 # one PID per word
trap 'say "interrupted"; kill $(jobs -p) 2> /dev/null; status=130; finish' INT TERM

# --------------------------------------------------------------------------
# Part 4's summary: Python that imports summary.py (its header, step table
# and part 3's check and model tables), written into the work folder.

if [ "$part" = 4 ]; then
    cat > "$work/summary4.py" << 'SUMMARY4'
"""Part 4's summary (written by verify.sh): summary4.py SCRIPTDIR LOGS.

Reuses summary.py (header, step table, part 3's check and model tables);
writes LOGS/deepbench-lstm.md beside the summary it prints. Never fails on
a missing or partial file.
"""
import glob
import os
import re
import statistics
import sys
from collections import Counter, OrderedDict

here, logs = sys.argv[1], sys.argv[2]
sys.path.insert(0, here)
import summary as S  # noqa: E402

ORDER = {"f32": 0, "tf32": 1, "f16": 2, "bf16": 3}
BAR = 1.03  # the project's bar: cnnbench within 3% of PyTorch
st = S.steps(logs)


def dtypes_of(prefix):
    """The dtypes of the steps PREFIX_<dtype>[...], in f32 tf32 f16 bf16 order."""
    found = {m.group(1) for n in st for m in [re.match(rf"^{prefix}_(f32|tf32|f16|bf16)(?:_|$)", n)] if m}
    return sorted(found, key=lambda d: ORDER.get(d, 9))


def cut(text, n=160):
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# --------------------------------------------------------------------------
# 1. rnn --check --algo all


def refusals(dt):
    """[(problem, algo, reason)] of the algorithms cnnbench named on stderr."""
    out = []
    for line in S.read(os.path.join(logs, f"rnncheck_{dt}.err")).splitlines():
        m = re.match(r"^cnnbench: (.+?) --algo (\S+): (.*)$", line.strip())
        if m:
            out.append(m.groups())
    return out


def rnn_check_section():
    dts = dtypes_of("rnncheck")
    if not dts:
        return [], {}
    lines_in = [l for l in S.read(os.path.join(logs, "rnn-check.txt")).splitlines() if l.strip()]
    n_prob = len(lines_in)
    lines = [f"## `rnn --check --algo all --dir all` on the GPU ({n_prob} problems: every cell x left2right, "
             "bidirectional-concat x the small shapes of `rnn-check.txt`)", "",
             "A dtype passes when its run exited 0, every checked record passed, and `standard` ran every "
             "problem's three passes; other algorithms cuDNN refuses are listed, not failures.", "",
             "| dtype | result | records (checked) | failed | worst rel err | records per algorithm | refused |",
             "|---|---|---:|---:|---|---|---:|"]
    verdict = OrderedDict()
    notes = []
    for dt in dts:
        status = st.get(f"rnncheck_{dt}", ("?",))[0]
        doc = S.load_json(os.path.join(logs, "rnn", f"check_{dt}.json"))
        recs = (doc or {}).get("records", []) if isinstance(doc, dict) else []
        checked = [r for r in recs if r.get("check")]
        bad = [r for r in checked if not r["check"].get("passed")]
        worst = max(checked, key=lambda r: S.err_key(r["check"].get("rel_err")), default=None)
        algos = Counter(r.get("algo") for r in recs)
        std = algos.get("standard", 0)
        ref = refusals(dt)
        why = []
        if status.startswith("skipped"):
            verdict[dt] = status
            lines.append(f"| {dt} | {status} | - | - | - | - | - |")
            continue
        if status != "ok":
            why.append(status)
        if bad:
            why.append(f"{len(bad)} check(s) failed")
        if std < 3 * n_prob:
            why.append(f"standard ran {std} of {3 * n_prob} passes")
        res = "pass" if not why else "**FAIL**: " + "; ".join(why)
        verdict[dt] = "pass" if not why else "FAIL (" + "; ".join(why) + ")"
        w = "-" if worst is None else (f"{S.fmt_err(worst['check'].get('rel_err'))} ({worst.get('problem')} "
                                       f"{worst.get('dir')} {worst.get('algo')})")
        lines.append(f"| {dt} | {res} | {len(recs)} ({len(checked)}) | {len(bad)} | {w} | "
                     + ", ".join(f"{a} {n}" for a, n in sorted(algos.items())) + f" | {len(ref)} |")
        for r in bad[:12]:
            notes.append(f"- FAILED {dt}: {r.get('problem')} {r.get('dir')} {r.get('algo')} rel err "
                         f"{S.fmt_err(r['check'].get('rel_err'))}")
    lines.append("")
    lines += notes + ([""] if notes else [])
    # The refusals, grouped by dtype, algorithm and reason.
    groups = OrderedDict()
    for dt in dts:
        for prob, algo, reason in refusals(dt):
            key = (dt, algo, cut(re.sub(r"\d+", "N", reason), 400))
            groups.setdefault(key, []).append((prob, reason))
    if groups:
        lines += ["### Algorithms cuDNN refused (named on stderr; the others ran)", ""]
        for (dt, algo, _), items in groups.items():
            probs = [p for p, _ in items]
            lines.append(f"- {dt} `{algo}`, {len(probs)} problem(s) ({', '.join(f'`{p}`' for p in probs[:4])}"
                         f"{' ...' if len(probs) > 4 else ''}): {cut(items[0][1], 240)}")
        lines.append("")
    return lines, verdict


# --------------------------------------------------------------------------
# 2. DeepBench's LSTM problems beside PyTorch


# The readers live in summary.py (quick uses them too).
key_of = S.rnn_key
cn_times = S.rnn_cn_times
pt_times = S.rnn_pt_times
med = S.median_or_none


def deepbench_section():
    dts = [dt for dt in dtypes_of("rnn_cn") if glob.glob(os.path.join(logs, "rnn", f"*_{dt}_[12].*"))]
    if not dts:
        return [], {}
    order = [key_of(l) for l in S.read(os.path.join(logs, "deepbench-lstm.txt")).splitlines() if l.strip()]
    lines = ["## DeepBench's LSTM training problems beside PyTorch's cuDNN LSTM (`--algo standard`)", "",
             "ABBA: cnnbench, PyTorch, PyTorch, cnnbench; each tool's time is the median of its two runs' medians "
             "(3 warm-up and 10 timed runs each). cnnbench's backward is bwd-data + bwd-weights (cuDNN's two "
             "calls, each timed with CUDA events); PyTorch's is one `torch.autograd.grad` of the output and final "
             "states, timed on the host clock between `torch.cuda.synchronize()` calls (so it also holds launch "
             "gaps). f32: cnnbench `CUDNN_FMA_MATH`, PyTorch with TF32 off; f16: both in half (fp32 "
             "accumulation in cnnbench). Ratio = cnnbench / PyTorch (below 1: cnnbench faster); the project's "
             f"bar is a ratio of at most {BAR:.2f}.", ""]
    verdict = OrderedDict()
    for dt in dts:
        cn = [cn_times(os.path.join(logs, "rnn", f"cn_{dt}_{r}.json")) for r in (1, 2)]
        pt = [pt_times(os.path.join(logs, "rnn", f"pt_{dt}_{r}.csv")) for r in (1, 2)]
        keys = list(OrderedDict.fromkeys(order + [k for d in cn + pt for k in d]))
        rows, ratios = [], {"fwd": [], "bwd": [], "step": []}
        for k in keys:
            c = {p: med([d[k][p] for d in cn if k in d]) for p in ("fwd", "bwd")}
            q = {p: med([d[k][p] for d in pt if k in d]) for p in ("fwd", "bwd")}
            if c["fwd"] is None and q["fwd"] is None:
                continue
            c["step"] = None if c["fwd"] is None else c["fwd"] + c["bwd"]
            q["step"] = None if q["fwd"] is None else q["fwd"] + q["bwd"]
            rat = {}
            for p in ("fwd", "bwd", "step"):
                rat[p] = c[p] / q[p] if c[p] and q[p] else None
                if rat[p] is not None:
                    ratios[p].append(rat[p])
            f = lambda v: "n/a" if v is None else S.fmt_ms(v)  # noqa: E731
            g = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
            rows.append(f"| {k} | {f(c['fwd'])} | {f(c['bwd'])} | {f(q['fwd'])} | {f(q['bwd'])} | {g(rat['fwd'])} | "
                        f"{g(rat['bwd'])} | {g(rat['step'])} |")
        lines += [f"### {dt}", "",
                  "| problem | cnnbench fwd ms | cnnbench bwd ms | PyTorch fwd ms | PyTorch bwd ms | fwd ratio | "
                  "bwd ratio | fwd+bwd ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|"] + rows + [""]
        if ratios["step"]:
            ms = statistics.median(ratios["step"])
            within = sum(1 for r in ratios["step"] if r <= BAR)
            text = (f"Median cnnbench / PyTorch over {len(ratios['step'])} problems ({dt}): forward "
                    f"**{statistics.median(ratios['fwd']):.3f}**, backward **{statistics.median(ratios['bwd']):.3f}**, "
                    f"forward + backward **{ms:.3f}**; {within} of {len(ratios['step'])} problems within "
                    f"{(BAR - 1) * 100:.0f}%.")
            verdict[dt] = (ms, within, len(ratios["step"]))
        else:
            text = f"No problem has both tools' times in {dt}: see the steps above."
            verdict[dt] = None
        lines += [text, ""]
    for path in sorted(glob.glob(os.path.join(logs, "rnn_pt_*.err")))[:1]:
        first = [l for l in S.read(path).splitlines() if l.startswith("torch ")][:1]
        if first:
            lines += [f"PyTorch: {first[0]}", ""]
    return lines, verdict


# --------------------------------------------------------------------------
# 3. The Keras models: part 3's tables


def keras_models_section():
    lines = S.part3_models(logs)
    cmd = ""
    for path in sorted(glob.glob(os.path.join(logs, "cn_*.cmd")))[:1]:
        cmd = S.read(path)
    w, i = re.search(r"--warmup (\d+)", cmd), re.search(r"--iters (\d+)", cmd)
    if w and i:
        lines = [l.replace("each run's 20 timed steps after 3 warm-up steps",
                           f"each run's {i.group(1)} timed steps after {w.group(1)} warm-up steps") for l in lines]
    if lines:
        lines[0] = "## The Keras examples' training steps beside PyTorch (NHWC, Keras batch sizes, ABBA)"
    return lines


def keras_ratios():
    out = {}
    for (m, b, dt), t in S.model_csvs(logs).items():
        c = [v[0] for v in t.get("cn", {}).values() if v[0] is not None]
        p = [v[0] for v in t.get("pt", {}).values() if v[0] is not None]
        if c and p:
            out.setdefault(dt, []).append(statistics.median(c) / statistics.median(p))
    return out


def main():
    lines = S.header(logs, "cnnbench GPU verification, part 4: recurrent layers and the Keras examples")
    torch = S.read(os.path.join(logs, "torch.txt")).strip().splitlines()
    if torch:
        lines.insert(-1, f"- PyTorch: {torch[-1]}")
    lines += S.step_table(logs)
    rc_lines, rc_verdict = rnn_check_section()
    db_lines, db_verdict = deepbench_section()
    lines += rc_lines + db_lines
    if db_lines:
        with open(os.path.join(logs, "deepbench-lstm.md"), "w") as f:
            f.write("\n".join(["# DeepBench LSTM: cnnbench rnn beside PyTorch on the GPU (verify.sh part 4)", ""]
                              + db_lines) + "\n")
    lines += S.part3_check(logs)
    lines += keras_models_section()
    known = S.read(os.path.join(logs, "pt-known.txt")).strip()
    if known:
        lines += [f"pytorch_model.py knows, of the Keras models: {known}", ""]
    if glob.glob(os.path.join(logs, "models", "cn_*.csv")):
        lines += ["Every cnnbench run's per-layer table is in `part4-per-layer.md` (and the results store files "
                  "in the logs); the DeepBench tables alone in `part4-deepbench-lstm.md`.", ""]

    gpu = st.get("gpu", ("", "", ""))
    fails = S.failed_steps(logs)
    skips = S.skipped_steps(logs)
    lines += ["## Closing note", ""]
    if gpu[0] != "ok":
        lines.append(f"Nothing ran: no usable GPU ({gpu[2] or gpu[0]}).")
        print("\n".join(lines))
        return
    text = [f"Part 4 on {gpu[2]}."]
    if rc_verdict:
        text.append("RNN checks (`--algo all`): " + ", ".join(f"{d} {v}" for d, v in rc_verdict.items()) + ".")
    for dt, v in db_verdict.items():
        if v:
            ms, within, n = v
            text.append(f"DeepBench LSTM {dt}: median cnnbench / PyTorch (fwd + bwd) {ms:.3f}, "
                        + ("within" if ms <= BAR else "**outside**") + f" the {(BAR - 1) * 100:.0f}% bar "
                        f"({within} of {n} problems within it).")
    checks = S.check_models(logs)
    if checks:
        bad = sum(1 for _, _, data, _, _ in checks for c in (data or []) if not c.get("passed"))
        nodata = [f"{d}" for d, _, data, _, _ in checks if data is None]
        text.append(f"Keras checks: {len(checks)} dtype(s) run, {bad} tensor(s) failed"
                    + (f", no JSON from {', '.join(nodata)}" if nodata else "") + ".")
    for dt, r in sorted(keras_ratios().items(), key=lambda kv: ORDER.get(kv[0], 9)):
        text.append(f"Keras steps {dt}: median cnnbench / PyTorch {statistics.median(r):.2f} over {len(r)} "
                    "model(s).")
    if fails:
        text.append("Steps that failed or were cut: " + ", ".join(f"{n} ({s})" for n, s in fails) + ".")
    if skips:
        text.append("Skipped: " + ", ".join(f"{n} ({s})" for n, s in skips[:12])
                    + (" ..." if len(skips) > 12 else "") + ".")
    if not fails and not skips:
        text.append("Every step ran and passed.")
    lines.append(" ".join(text))
    print("\n".join(lines))


main()
SUMMARY4
fi

# --------------------------------------------------------------------------
# What every part records first: the machine, the libraries, cnnbench info.

# shellcheck source=env.sh disable=SC1091 # (shellcheck -x follows it)
. "$here/env.sh" 2> "$logs/env-sh.txt"
{
    echo "date         $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host         $(uname -srm), $ncpu CPUs"
    if git -C "$root" rev-parse HEAD > /dev/null 2>&1; then
        echo "checkout     $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD 2> /dev/null || echo ' (modified)')"
    else
        echo "checkout     (no git)"
    fi
    echo "binary       $bin"
    echo "pack         $( [ -f "$pack/MANIFEST" ] && sed -n 's/^commit *//p' "$pack/MANIFEST" || echo "(none: $pack/MANIFEST missing)")"
    echo "env.sh       $(tr '\n' ' ' < "$logs/env-sh.txt" 2> /dev/null)"
    echo "cuda major   ${CNNBENCH_CUDA_MAJOR:-}"
    echo "lib dirs     ${CNNBENCH_LIB_DIRS:-}"
    echo "LD_LIBRARY_PATH ${LD_LIBRARY_PATH:-}"
    echo "budget       $budget s (+ $grace s grace)"
    if command -v nvidia-smi > /dev/null 2>&1; then
        echo "nvidia-smi   $(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_mode --format=csv,noheader 2>&1 | head -n 4 | tr '\n' ';')"
    else
        echo "nvidia-smi   not found"
    fi
} > "$logs/env.txt"
command -v nvidia-smi > /dev/null 2>&1 && timeout 30 nvidia-smi > "$logs/nvidia-smi.txt" 2>&1
[ -f "$pack/MANIFEST" ] && cp "$pack/MANIFEST" "$logs/pack-MANIFEST.txt"
say "$label: $bin; logs in $work until the end, then $out"

run info 0 180 "$bin" info
run info_json 0 180 "$bin" info --format json
cp -f "$logs/info.out" "$logs/info.txt"
cp -f "$logs/info_json.out" "$logs/info.json"
usable=0
grep -q '"usable": *true' "$logs/info.json" && usable=1
# A GPU that nvidia-smi lists but cnnbench cannot use is a failure.
gpu_listed=0
if command -v nvidia-smi > /dev/null 2>&1 && timeout 30 nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
    gpu_listed=1
fi
why=$(sed -n 's/.*"reason": *"\(.*\)",*$/\1/p' "$logs/info.json" | head -n 1)
if [ $usable = 1 ]; then
    record gpu ok 0 "$(sed -n 's/^gpu  *//p' "$logs/info.txt" | head -n 1)"
elif [ $gpu_listed = 1 ]; then
    record gpu "FAILED: nvidia-smi lists a GPU but cnnbench cannot use it" 0 "$why"
else
    record gpu "skipped: no GPU" 0 "$why"
fi

# --------------------------------------------------------------------------
# Part 1: tests and compute-sanitizer.

# test_bin NAME: the packed test binary, else the newest built one.
test_bin() {
    if [ -x "$pack/tests/$1" ]; then
        echo "$pack/tests/$1"
        return
    fi
    find "$root/target/release/deps" -maxdepth 1 -type f -executable -name "$1-*" \
        ! -name '*.so' ! -name '*.d' -printf '%T@ %p\n' 2> /dev/null | sort -rn | head -n 1 | cut -d' ' -f2-
}
sanitizer() {
    local c
    for c in "$(command -v compute-sanitizer 2> /dev/null)" /usr/local/cuda/bin/compute-sanitizer \
        /usr/local/cuda/compute-sanitizer/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
        /opt/nvidia/compute-sanitizer/compute-sanitizer; do
        if [ -n "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return
        fi
    done
}

# compute-sanitizer's tools, and the convolution they run over.
sanitizer_tools="memcheck racecheck initcheck synccheck"
san_conv=mb4ic32ih28oc64oh28kh3ph1

part1() {
    local layers name t req=() cs
    [ $usable = 1 ] && req=(env CNNBENCH_GPU_LIBS=required CNNBENCH_GPU=required)
    layers=$(test_bin cnnbench_layers)
    if [ -z "$layers" ]; then
        record tests_gpu "FAILED: no cnnbench_layers test binary (run scripts/gpu/pack.sh)" 0
    else
        echo "$layers" > "$logs/tests_gpu.bin"
        # stdout and stderr in one file, so that each `skipped:` line
        # follows its test's name.
        run tests_gpu 20 240 sh -c 'exec "$@" 2>&1' sh ${req[@]+"${req[@]}"} "$layers" \
            backend_tests real_libs cuda_programs backend::cuda ::cuda net::gpu \
            --test-threads=1 --nocapture
    fi
    cs=$(sanitizer)
    local names="" tool
    for tool in $sanitizer_tools; do
        names="$names ${tool}_model ${tool}_conv_f32_nchw ${tool}_conv_f16_nhwc"
    done
    if [ $usable = 0 ]; then
        for name in $names; do record "$name" "skipped: no GPU" 0 "$why"; done
    elif [ -z "$cs" ]; then
        for name in $names; do record "$name" "skipped: compute-sanitizer not found" 0; done
    else
        # Default options: every API error counts (issue 27).
        for tool in $sanitizer_tools; do
            run "${tool}_model" 60 240 "$cs" --tool "$tool" --error-exitcode 1 "$bin" model resnet18 \
                --device gpu --batch 8 --warmup 0 --iters 1 --workspace-limit 512M --no-save -q
            run "${tool}_conv_f32_nchw" 40 150 "$cs" --tool "$tool" --error-exitcode 1 "$bin" conv \
                "$san_conv" --device gpu --dtype f32 --layout nchw --dir all --algo all --check \
                --iters 1 --warmup 0 --no-save -q
            run "${tool}_conv_f16_nhwc" 40 150 "$cs" --tool "$tool" --error-exitcode 1 "$bin" conv \
                "$san_conv" --device gpu --dtype f16 --layout nhwc --dir all --algo all --check \
                --iters 1 --warmup 0 --no-save -q
        done
    fi
    # NCCL (issue 17): the all-reduce benchmark over the GPUs here, the
    # data-parallel path at world size 1 in-process and as a launched rank
    # (torchrun's variables), each record beside its plain single-GPU step.
    if [ $usable = 0 ]; then
        for name in allreduce dp_gpus1 dp_launched; do record "$name" "skipped: no GPU" 0 "$why"; done
    else
        mkdir -p "$logs/dp"
        run allreduce 30 120 "$bin" allreduce --iters 20 --dtype f32,bf16 \
            --out "$logs/dp/allreduce.json" --format json --results "$logs/results" -q
        run dp_gpus1 60 240 "$bin" model resnet50 --gpus 1 --batch 64 --dtype f16 --warmup 5 \
            --iters 30 --per-layer --out "$logs/dp/resnet50-gpus1.json" --format json \
            --results "$logs/results" -q
        run dp_launched 40 180 env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=29517 "$bin" model resnet18 --launcher torchrun --batch 64 --dtype f16 \
            --warmup 3 --iters 20 --out "$logs/dp/resnet18-launched.json" --format json \
            --results "$logs/results" -q
    fi
    # Then every packed test binary (CPU tests included: the binaries run
    # on another machine's CPU here), after the sanitizer so that a tight
    # budget cuts these; the layers' GPU tests ran above.
    local skip
    if [ -d "$pack/tests" ]; then
        for t in "$pack"/tests/*; do
            [ -x "$t" ] || continue
            name=$(basename "$t")
            skip=()
            [ "$name" = cnnbench_layers ] && skip=(--skip backend_tests --skip real_libs
                --skip cuda_programs --skip backend::cuda --skip ::cuda --skip net::gpu)
            run "tests_all_$name" 20 240 sh -c 'exec "$@" 2>&1' sh ${req[@]+"${req[@]}"} "$t" \
                ${skip[@]+"${skip[@]}"}
        done
    else
        record tests_all "skipped: no $pack/tests (run scripts/gpu/pack.sh)" 0
    fi
}

# --------------------------------------------------------------------------
# Part 2: convolutions and GEMMs.

# gpu_jobs WANTED: WANTED, or 1 when the GPU is in an exclusive compute
# mode (then a second process cannot open it).
gpu_jobs() {
    if command -v nvidia-smi > /dev/null 2>&1 \
        && timeout 20 nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2> /dev/null \
        | grep -qi exclusive; then
        echo 1
    else
        echo "$1"
    fi
}

part2() {
    local dt l p cb=${CHECK_BATCH:-2} ct=${CHECK_THREADS:-2} name
    local layers2="mb16ic64ih56oc64oh56kh3ph1 mb16ic1024ih14oc256oh14kh1"
    maxjobs=$(gpu_jobs "${JOBS:-8}")
    mkdir -p "$logs/check" "$logs/time"
    local common=(--device gpu --format json --results "$logs/results" -q)
    # 1. Checks, side by side (the CPU reference is the cost; its GPU
    #    times are not timings).
    for dt in f32 tf32 f16 bf16; do
        for l in nhwc nchw; do
            bg "r50check_${dt}_$l" 300 "$bin" conv --from builtin:resnet50 --batch "$cb" \
                --dtype "$dt" --layout "$l" --dir FWD_D,BWD_D,BWD_W --algo auto --check \
                --warmup 1 --iters 3 --threads "$ct" --workspace-limit 1G \
                --out "$logs/check/r50_${dt}_$l.json" "${common[@]}"
        done
    done
    for dt in f32 tf32 f16 bf16; do
        for l in nhwc nchw; do
            bg "oddcheck_${dt}_$l" 240 "$bin" conv --from "$here/odd.txt" --dtype "$dt" --layout "$l" \
                --dir all --algo heuristic --check --warmup 1 --iters 3 --threads "$ct" \
                --workspace-limit 1G --out "$logs/check/odd_${dt}_$l.json" "${common[@]}"
        done
    done
    for dt in f32 f16; do
        for p in $layers2; do
            bg "allcheck_${dt}_${p%%ih*}" 240 "$bin" conv "$p" --batch "$cb" --dtype "$dt" --layout nhwc \
                --dir FWD_D,BWD_D,BWD_W --algo all --check --warmup 0 --iters 1 --threads "$ct" \
                --workspace-limit 1G --out "$logs/check/all_${dt}_${p%%ih*}.json" "${common[@]}"
        done
    done
    for dt in f32 tf32 f16 bf16; do
        bg "gemmcheck_$dt" 240 "$bin" gemm 1760x128x1760 1024x1024x1024 --dtype "$dt" --check \
            --warmup 1 --iters 3 --threads "$ct" --out "$logs/check/gemm_$dt.json" "${common[@]}"
    done
    bg_wait
    # 2. Timings, alone on the GPU, at the problems' own batch.
    for l in nhwc nchw; do
        for dt in f32 tf32 f16 bf16; do
            run "r50_${dt}_$l" 25 150 "$bin" conv --from builtin:resnet50 --dtype "$dt" --layout "$l" \
                --dir FWD_D,BWD_D,BWD_W --algo auto --warmup 3 --iters 20 \
                --out "$logs/time/r50_${dt}_$l.json" "${common[@]}"
        done
    done
    for dt in f32 f16; do
        for p in $layers2; do
            name="all_${dt}_${p%%ih*}"
            run "$name" 15 120 "$bin" conv "$p" --dtype "$dt" --layout nhwc --dir FWD_D,BWD_D,BWD_W \
                --algo all --warmup 3 --iters 20 --out "$logs/time/$name.json" "${common[@]}"
        done
    done
    for dt in f32 tf32 f16 bf16; do
        run "gemm_$dt" 10 90 "$bin" gemm 8192x8192x8192 4096x4096x4096 1760x128x1760 --dtype "$dt" \
            --warmup 3 --iters 20 --out "$logs/time/gemm_$dt.json" "${common[@]}"
    done
}

# --------------------------------------------------------------------------
# Parts 3 and 4: whole models.

# torch_probe: torch.txt (versions, device) and torch_ok (1: importable).
torch_probe() {
    if "$py" -c 'import torch' > /dev/null 2>&1; then
        "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
torch.backends.cudnn.version(), "device", torch.cuda.get_device_name() if torch.cuda.is_available() else None)' \
            > "$logs/torch.txt" 2>&1
        torch_ok=1
    else
        "$py" -c 'import torch' > "$logs/torch.txt" 2>&1
        torch_ok=0
    fi
}
# model_names: every model `cnnbench model` knows. From its error for an
# unknown name ("unknown model '?'; there are: a, b, ..., or all"), else
# from the "Models:" paragraph of `model --help` (up to its blank line or
# the end; every word that `model WORD --describe` accepts), else a fixed
# list.
model_names() {
    local s w
    s=$("$bin" model '?' --describe 2>&1 | sed -n 's/.*there are: \(.*\), or all.*/\1/p' | head -n 1 | tr -d ',')
    if [ -z "$s" ]; then
        for w in $("$bin" model --help 2> /dev/null \
            | awk '/^Models:/ { on = 1; sub(/^Models:/, "") } on && /^[[:space:]]*$/ { exit } on' \
            | tr -c 'a-z0-9\n-' ' '); do
            [ "$w" != all ] && "$bin" model "$w" --describe > /dev/null 2>&1 && s="$s $w"
        done
    fi
    echo "${s:-alexnet googlenet inception-v3 vgg16 vgg19 resnet18 resnet34 resnet50 resnet101 resnet152 resnet200 mnist-mlp mnist-cnn cifar10-cnn imdb-fasttext imdb-bilstm lstm-text}"
}

part3() {
    local dt g b longest=60 t0 m model=${MODEL:-resnet50}
    local subset_args=()
    for m in ${CHECK_SUBSET:-alexnet googlenet resnet50}; do subset_args+=(--model "$m"); done
    # An empty list would mean every model to `check`.
    [ ${#subset_args[@]} -gt 0 ] || subset_args=(--model alexnet)
    mkdir -p "$logs/results" "$logs/models"
    torch_probe
    # 1. check per dtype, side by side (no timings are taken); every model
    #    in two halves (a cut-short process loses only its half).
    if [ -z "${SKIP_CHECK:-}" ]; then
        local all half1=() half2=() i=0 n ct
        all=$(model_names)
        echo "$all" > "$logs/models.txt"
        n=$(echo "$all" | wc -w)
        for m in $all; do
            if [ "$i" -lt $(((n + 1) / 2)) ]; then half1+=(--model "$m"); else half2+=(--model "$m"); fi
            i=$((i + 1))
        done
        n=$(($(echo "${CHECK_FULL-f32 f16}" | wc -w) * 2 + $(echo "${CHECK_PART-tf32 bf16}" | wc -w)))
        maxjobs=$(gpu_jobs $((n > 0 ? n : 1)))
        ct=$(((ncpu + maxjobs - 1) / maxjobs))
        for dt in ${CHECK_FULL-f32 f16}; do
            bg "check_${dt}_1" "${CHECK_TIMEOUT:-240}" "$bin" check --device gpu "${half1[@]}" --batch 2 \
                --dtype "$dt" --layout nhwc --format json --threads "$ct"
            bg "check_${dt}_2" "${CHECK_TIMEOUT:-240}" "$bin" check --device gpu "${half2[@]}" --batch 2 \
                --dtype "$dt" --layout nhwc --format json --threads "$ct"
        done
        for dt in ${CHECK_PART-tf32 bf16}; do
            bg "check_${dt}_s" "${CHECK_TIMEOUT:-240}" "$bin" check --device gpu "${subset_args[@]}" \
                --batch 2 --dtype "$dt" --layout nhwc --format json --threads "$ct"
        done
        bg_wait
    else
        record check "skipped: SKIP_CHECK is set" 0
    fi
    # 2. Training steps beside PyTorch, ABBA, one batch:dtype group at a time.
    cn() { # batch dtype round
        run "cn_${model}_$1_$2_$3" 0 180 "$bin" model "$model" --device gpu --batch "$1" --dtype "$2" \
            --layout nhwc --warmup 3 --iters 20 --per-layer --format csv \
            --out "$logs/models/cn_${model}_$1_$2_$3.csv" --results "$logs/results" -q
    }
    pt() {
        if [ "$torch_ok" = 0 ]; then
            record "pt_${model}_$1_$2_$3" "skipped: PyTorch not importable by $py" 0 "$(tail -n 1 "$logs/torch.txt")"
            return
        fi
        run "pt_${model}_$1_$2_$3" 0 180 "$py" "$root/scripts/peers/pytorch_model.py" "$model" \
            --device cuda --batch "$1" --dtype "$2" --layout nhwc --warmup 3 --iters 20
        cp -f "$logs/pt_${model}_$1_$2_$3.out" "$logs/models/pt_${model}_$1_$2_$3.csv"
    }
    for g in ${MODEL_GROUPS:-256:f16 256:f32 64:f16 64:f32 256:bf16 256:tf32 64:bf16 64:tf32}; do
        b=${g%%:*}
        dt=${g#*:}
        if [ "$(left)" -lt "$longest" ]; then
            record "group_${model}_${b}_$dt" \
                "skipped: time budget ($(left) s left, a group took up to $longest s)" 0
            continue
        fi
        t0=$SECONDS
        cn "$b" "$dt" 1
        pt "$b" "$dt" 1
        pt "$b" "$dt" 2
        cn "$b" "$dt" 2
        [ $((SECONDS - t0)) -gt "$longest" ] && longest=$((SECONDS - t0))
    done
    # The per-layer tables, from the results store.
    "$py" "$here/summary.py" --per-layer "$logs/results" > "$logs/per-layer.md" 2>> "$logs/summary.err" || true
}

# --------------------------------------------------------------------------
# Part 4: recurrent layers (cuDNN RNN) and the Keras examples.

# pt_known MODEL...: those of MODEL... that scripts/peers/pytorch_model.py
# accepts (asked of its expand_models, without importing torch); all of
# them when that cannot be told.
pt_known() {
    (cd "$root/scripts/peers" && "$py" - "$@" << 'PTKNOWN'
import sys
names = sys.argv[1:]
try:
    import pytorch_model as p
    known = []
    for m in names:
        try:
            p.expand_models([m])
            known.append(m)
        except (Exception, SystemExit):
            pass
except (Exception, SystemExit) as e:
    sys.stderr.write(f"cannot import pytorch_model.py ({e}): trying every model\n")
    known = names
print(" ".join(known))
PTKNOWN
    ) 2>> "$logs/pt-known.err" || echo "$*"
}

part4() {
    local dt c d p b g e n ct t0 lstm known unknown longest=60 klongest=60
    local keras=${KERAS_MODELS:-mnist-mlp:128 mnist-cnn:128 cifar10-cnn:32 imdb-fasttext:32 imdb-bilstm:32 lstm-text:128}
    local names=() kargs=() grp=()
    mkdir -p "$logs/rnn" "$logs/models" "$logs/results"
    torch_probe
    for e in $keras; do
        names+=("${e%%:*}")
        kargs+=(--model "${e%%:*}")
    done
    # 1. Checks, side by side (their GPU times are not timings).
    for c in lstm gru rnn-tanh rnn-relu; do
        for d in left2right bidirectional-concat; do
            for p in ${RNN_CHECK_PROBLEMS:-l2t5mb4sic16 l1t7mb3sic24slc16 l1t10mb32sic128}; do
                echo "--cell=$c --direction=$d $p"
            done
        done
    done > "$logs/rnn-check.txt"
    if [ -z "${SKIP_CHECK:-}" ]; then
        n=$(($(echo "${RNN_DTYPES-f32 tf32 f16 bf16}" | wc -w) + $(echo "${KERAS_CHECK-f32 f16 tf32 bf16}" | wc -w)))
        maxjobs=$(gpu_jobs $((n > 0 ? n : 1)))
        ct=$(((ncpu + maxjobs - 1) / maxjobs))
        for dt in ${RNN_DTYPES-f32 tf32 f16 bf16}; do
            bg "rnncheck_$dt" "${CHECK_TIMEOUT:-240}" "$bin" rnn --from "$logs/rnn-check.txt" --device gpu \
                --dtype "$dt" --algo all --dir all --check --warmup 1 --iters 3 --threads "$ct" \
                --format json --out "$logs/rnn/check_$dt.json" --no-save -q
        done
        if [ ${#kargs[@]} -gt 0 ]; then
            for dt in ${KERAS_CHECK-f32 f16 tf32 bf16}; do
                bg "check_${dt}_k" "${CHECK_TIMEOUT:-240}" "$bin" check --device gpu "${kargs[@]}" --batch 2 \
                    --dtype "$dt" --layout nhwc --format json --threads "$ct"
            done
        fi
        bg_wait
    else
        record check "skipped: SKIP_CHECK is set" 0
    fi
    # 2. DeepBench's LSTM problems beside PyTorch's cuDNN LSTM, ABBA, one
    #    dtype at a time, alone on the GPU.
    lstm=$logs/deepbench-lstm.txt
    grep -E '^[[:space:]]*--cell=lstm[[:space:]]' "$root/src/problem/lists/deepbench_rnn_training.txt" \
        > "$lstm" 2> /dev/null
    rcn() { # dtype round
        run "rnn_cn_$1_$2" 0 180 "$bin" rnn --from "$lstm" --device gpu --dtype "$1" --algo standard \
            --dir all --warmup 3 --iters 10 --format json --out "$logs/rnn/cn_$1_$2.json" \
            --results "$logs/results" -q
    }
    rpt() {
        if [ "$torch_ok" = 0 ]; then
            record "rnn_pt_$1_$2" "skipped: PyTorch not importable by $py" 0 "$(tail -n 1 "$logs/torch.txt")"
            return
        fi
        run "rnn_pt_$1_$2" 0 180 "$py" "$root/scripts/peers/pytorch_rnn.py" --from "$lstm" --device cuda \
            --dtype "$1" --warmup 3 --iters 10 --format csv
        cp -f "$logs/rnn_pt_$1_$2.out" "$logs/rnn/pt_$1_$2.csv"
    }
    if [ ! -s "$lstm" ]; then
        record deepbench "FAILED: no --cell=lstm line in src/problem/lists/deepbench_rnn_training.txt" 0
    else
        for dt in ${RNN_PEER_DTYPES-f32 f16}; do
            if [ "$(left)" -lt "$longest" ]; then
                record "deepbench_$dt" "skipped: time budget ($(left) s left, a dtype took up to $longest s)" 0
                continue
            fi
            t0=$SECONDS
            rcn "$dt" 1
            rpt "$dt" 1
            rpt "$dt" 2
            rcn "$dt" 2
            [ $((SECONDS - t0)) -gt "$longest" ] && longest=$((SECONDS - t0))
        done
    fi
    # 3. The Keras examples' training steps beside pytorch_model.py, ABBA,
    #    one batch:dtype group at a time: cnnbench one process per model,
    #    PyTorch one per group (its start is the cost).
    known=" $(pt_known ${names[@]+"${names[@]}"} | tr '\n' ' ') "
    echo "$known" > "$logs/pt-known.txt"
    unknown=""
    for m in ${names[@]+"${names[@]}"}; do
        case $known in *" $m "*) ;; *) unknown="$unknown $m" ;; esac
    done
    if [ -n "$unknown" ]; then
        record pt_models "skipped: scripts/peers/pytorch_model.py does not know:$unknown (yet)" 0
    fi
    kcn() { # batch dtype round model...
        local b=$1 dt=$2 r=$3 m
        shift 3
        for m in "$@"; do
            run "cn_${m}_${b}_${dt}_$r" 0 120 "$bin" model "$m" --device gpu --batch "$b" --dtype "$dt" \
                --layout nhwc --warmup 5 --iters 50 --per-layer --format csv \
                --out "$logs/models/cn_${m}_${b}_${dt}_$r.csv" --results "$logs/results" -q
        done
    }
    kpt() { # batch dtype round model...
        local b=$1 dt=$2 r=$3 m ms=()
        shift 3
        for m in "$@"; do
            case $known in *" $m "*) ms+=("$m") ;; esac
        done
        [ ${#ms[@]} -gt 0 ] || return 0
        if [ "$torch_ok" = 0 ]; then
            record "pt_k${b}_${dt}_$r" "skipped: PyTorch not importable by $py" 0 "$(tail -n 1 "$logs/torch.txt")"
            return
        fi
        run "pt_k${b}_${dt}_$r" 0 180 "$py" "$root/scripts/peers/pytorch_model.py" "${ms[@]}" --device cuda \
            --batch "$b" --dtype "$dt" --layout nhwc --warmup 5 --iters 50
        # One CSV per model, named as part 3's (summary.py reads them so).
        awk -F, -v dir="$logs/models" -v tail="${b}_${dt}_$r" '
            NR == 1 { h = $0; next }
            $1 != "" {
                f = dir "/pt_" $1 "_" tail ".csv"
                if (!(f in seen)) { print h > f; seen[f] = 1 }
                print > f
            }' "$logs/pt_k${b}_${dt}_$r.out"
    }
    for g in ${KERAS_GROUPS:-128:f32 32:f32 128:f16 32:f16}; do
        b=${g%%:*}
        dt=${g#*:}
        grp=()
        for e in $keras; do [ "${e#*:}" = "$b" ] && grp+=("${e%%:*}"); done
        if [ ${#grp[@]} -eq 0 ]; then
            record "keras_${b}_$dt" "skipped: no model of KERAS_MODELS at batch $b" 0
            continue
        fi
        if [ "$(left)" -lt "$klongest" ]; then
            record "keras_${b}_$dt" "skipped: time budget ($(left) s left, a group took up to $klongest s)" 0
            continue
        fi
        t0=$SECONDS
        kcn "$b" "$dt" 1 "${grp[@]}"
        kpt "$b" "$dt" 1 "${grp[@]}"
        kpt "$b" "$dt" 2 "${grp[@]}"
        kcn "$b" "$dt" 2 "${grp[@]}"
        [ $((SECONDS - t0)) -gt "$klongest" ] && klongest=$((SECONDS - t0))
    done
    "$py" "$here/summary.py" --per-layer "$logs/results" > "$logs/per-layer.md" 2>> "$logs/summary.err" || true
}

# --------------------------------------------------------------------------
# quick: the short verification (issue 27), in one command of at most 6
# minutes; the order and the estimates are in this script's header.

quick() {
    local wanted=" ${QUICK_STEPS:-check nccl r50 per-layer lstm keras compare sanitize} "
    local groups=${QUICK_GROUPS:-256:f16 256:bf16 128:tf32 64:f32}
    local nogpu="skipped: no GPU" g n f cs layers tool dl dt l
    local keras="mnist-mlp mnist-cnn cifar10-cnn imdb-fasttext imdb-bilstm lstm-text"
    local store=(--results "$logs/results")
    local names sans
    [ $gpu_listed = 1 ] && nogpu="skipped: the GPU is not usable (see the gpu step)"
    mkdir -p "$logs/check" "$logs/dp" "$logs/rnn" "$logs/results"
    want() { case $wanted in *" $1 "*) return 0 ;; esac; return 1; }
    # gpu_or_skip NAME...: true with a usable GPU, else records each NAME
    # as skipped.
    gpu_or_skip() {
        [ $usable = 1 ] && return 0
        local n
        for n in "$@"; do record "$n" "$nogpu" 0 "$why"; done
        return 1
    }
    cs=$(sanitizer)
    # PyTorch's versions, imported once in the background while the checks
    # run (which also warms the file cache for the first timed PyTorch run).
    torch_pid=""
    torch_ok=0
    if [ $usable = 1 ] && { want r50 || want lstm || want keras; }; then
        (
            "$py" - > "$logs/torch.txt" 2>&1 << 'TORCH'
import torch
try:
    import torchvision
    tv = torchvision.__version__
except Exception as e:  # pytorch_model.py runs resnet50 without it
    tv = f"not importable ({e})"
print("torch", torch.__version__, "torchvision", tv, "cuda", torch.version.cuda, "cudnn",
      torch.backends.cudnn.version(), "device",
      torch.cuda.get_device_name() if torch.cuda.is_available() else None)
TORCH
            echo $? > "$logs/torch.rc"
        ) &
        torch_pid=$!
    fi
    # pt_ready NAME: true when PyTorch imported, else records NAME as skipped.
    pt_ready() {
        if [ -n "$torch_pid" ]; then
            wait "$torch_pid" 2> /dev/null
            torch_pid=""
            [ "$(cat "$logs/torch.rc" 2> /dev/null)" = 0 ] && torch_ok=1
        fi
        [ "$torch_ok" = 1 ] && return 0
        record "$1" "skipped: PyTorch not importable by $py" 0 "$(tail -n 1 "$logs/torch.txt" 2> /dev/null)"
        return 1
    }

    # 1. Checks and compute-sanitizer over small work, side by side.
    if want check; then
        rerun_hint=check
        sans=memcheck_model
        for tool in $sanitizer_tools; do
            sans="$sans ${tool}_conv_f16_nhwc ${tool}_conv_f32_nchw"
        done
        names="tests_gpu conv_check_f16_nhwc conv_check_f32_nchw check_bf16 $sans"
        # shellcheck disable=SC2086 # one name per word
        if gpu_or_skip $names; then
            maxjobs=$(gpu_jobs "${JOBS:-8}")
            layers=$(test_bin cnnbench_layers)
            if [ -z "$layers" ]; then
                record tests_gpu "FAILED: no cnnbench_layers test binary (run scripts/gpu/pack.sh)" 0
            else
                echo "$layers" > "$logs/tests_gpu.bin"
                bg tests_gpu 240 sh -c 'exec "$@" 2>&1' sh env CNNBENCH_GPU_LIBS=required \
                    CNNBENCH_GPU=required "$layers" backend_tests real_libs cuda_programs backend::cuda \
                    ::cuda net::gpu --test-threads=2
            fi
            for dl in f16:nhwc f32:nchw; do
                dt=${dl%%:*}
                l=${dl#*:}
                bg "conv_check_${dt}_$l" 150 "$bin" conv --from builtin:resnet50 --device gpu --dtype "$dt" \
                    --layout "$l" --batch 2 --check --threads 4 --iters 3 --warmup 1 --format json \
                    --out "$logs/check/conv_${dt}_$l.json" "${store[@]}" -q
            done
            bg check_bf16 150 "$bin" check --device gpu --model resnet50 --model alexnet --model googlenet \
                --batch 2 --dtype bf16 --layout nhwc --threads 4 --format json
            if [ -z "$cs" ]; then
                for n in $sans; do record "$n" "skipped: compute-sanitizer not found" 0; done
            else
                bg memcheck_model 90 "$cs" --tool memcheck --error-exitcode 1 "$bin" model resnet18 \
                    --device gpu --batch 8 --warmup 0 --iters 1 --no-save -q
                for tool in $sanitizer_tools; do
                    for dl in f16:nhwc f32:nchw; do
                        dt=${dl%%:*}
                        l=${dl#*:}
                        bg "${tool}_conv_${dt}_$l" 90 "$cs" --tool "$tool" --error-exitcode 1 "$bin" conv \
                            "$san_conv" --device gpu --dtype "$dt" --layout "$l" --dir all --algo all --check \
                            --iters 1 --warmup 0 --no-save -q
                    done
                done
            fi
            bg_wait
        fi
    fi

    # 2. NCCL: all-reduce correctness at every size, and world size 1.
    if want nccl && gpu_or_skip allreduce dp_gpus1; then
        rerun_hint=nccl
        run allreduce 10 60 "$bin" allreduce --iters 20 --dtype f32,bf16 --format json \
            --out "$logs/dp/allreduce.json" "${store[@]}" -q
        run dp_gpus1 15 90 "$bin" model resnet50 --gpus 1 --batch 64 --dtype f16 --layout nhwc --warmup 5 \
            --iters 30 --format json --out "$logs/dp/resnet50-gpus1.json" "${store[@]}" -q
    fi

    # 3-8. Timings, alone on the GPU.
    local longest=50
    r50_cn() { # batch dtype round
        run "cn_resnet50_$1_$2_$3" 0 120 "$bin" model resnet50 --device gpu --batch "$1" --dtype "$2" \
            --layout nhwc --warmup 5 --iters 20 --format csv "${store[@]}" -q
    }
    r50_pt() {
        pt_ready "pt_resnet50_$1_$2_$3" || return 0
        run "pt_resnet50_$1_$2_$3" 0 150 "$py" "$root/scripts/peers/pytorch_model.py" resnet50 \
            --device cuda --batch "$1" --dtype "$2" --layout nhwc --warmup 5 --iters 20
    }
    # r50_group BATCH:DTYPE: ABBA, when the time left covers a group.
    r50_group() {
        local b=${1%%:*} dt=${1#*:} t0
        gpu_or_skip "group_resnet50_${b}_$dt" || return 0
        if [ "$(left)" -lt "$longest" ]; then
            record "group_resnet50_${b}_$dt" "skipped: time budget ($(left) s left, a group takes about $longest s)" \
                0 "rerun: r50 $b:$dt"
            return 0
        fi
        t0=$SECONDS
        rerun_hint="r50 $b:$dt"
        r50_cn "$b" "$dt" 1
        r50_pt "$b" "$dt" 1
        r50_pt "$b" "$dt" 2
        r50_cn "$b" "$dt" 2
        [ $((SECONDS - t0)) -gt "$longest" ] && longest=$((SECONDS - t0))
    }
    # The first group now, the others after the comparison.
    local garr=()
    want r50 && read -r -a garr <<< "$groups"
    [ ${#garr[@]} -gt 0 ] && r50_group "${garr[0]}"
    if want per-layer && gpu_or_skip per_layer; then
        rerun_hint=per-layer
        run per_layer 20 90 "$bin" model resnet50 --device gpu --batch 256 --dtype f16 --layout nhwc \
            --warmup 3 --iters 10 --per-layer --format json "${store[@]}" -q
    fi
    lstm_cn() { # round
        run "rnn_cn_f16_$1" 0 90 "$bin" rnn --from "$lstm" --device gpu --dtype f16 --algo standard \
            --dir all --warmup 3 --iters 10 --format json --out "$logs/rnn/cn_f16_$1.json" "${store[@]}" -q
    }
    lstm_pt() {
        pt_ready "rnn_pt_f16_$1" || return 0
        run "rnn_pt_f16_$1" 0 90 "$py" "$root/scripts/peers/pytorch_rnn.py" --from "$lstm" --device cuda \
            --dtype f16 --warmup 3 --iters 10 --format csv
    }
    local lstm=$logs/deepbench-lstm.txt
    if want lstm && gpu_or_skip deepbench_lstm_f16; then
        rerun_hint=lstm
        grep -E '^[[:space:]]*--cell=lstm[[:space:]]' "$root/src/problem/lists/deepbench_rnn_training.txt" \
            > "$lstm" 2> /dev/null
        if [ ! -s "$lstm" ]; then
            record deepbench_lstm_f16 "FAILED: no --cell=lstm line in src/problem/lists/deepbench_rnn_training.txt" 0
        elif [ "$(left)" -lt 35 ]; then
            record deepbench_lstm_f16 "skipped: time budget ($(left) s left, about 40 s needed)" 0 "rerun: lstm"
        else
            lstm_cn 1
            lstm_pt 1
            lstm_pt 2
            lstm_cn 2
        fi
    fi
    if want keras && gpu_or_skip keras_128_f32; then
        rerun_hint=keras
        if [ "$(left)" -lt 15 ]; then
            record keras_128_f32 "skipped: time budget ($(left) s left, about 16 s needed)" 0 "rerun: keras"
        else
            # shellcheck disable=SC2086 # one model per word
            {
                run cn_keras_128_f32_1 0 60 "$bin" model $keras --device gpu --batch 128 --dtype f32 \
                    --layout nhwc --warmup 5 --iters 50 --format csv "${store[@]}" -q
                pt_ready pt_keras_128_f32_1 && run pt_keras_128_f32_1 0 90 "$py" \
                    "$root/scripts/peers/pytorch_model.py" $keras --device cuda --batch 128 --dtype f32 \
                    --layout nhwc --warmup 5 --iters 50
                pt_ready pt_keras_128_f32_2 && run pt_keras_128_f32_2 0 90 "$py" \
                    "$root/scripts/peers/pytorch_model.py" $keras --device cuda --batch 128 --dtype f32 \
                    --layout nhwc --warmup 5 --iters 50
                run cn_keras_128_f32_2 0 60 "$bin" model $keras --device gpu --batch 128 --dtype f32 \
                    --layout nhwc --warmup 5 --iters 50 --format csv "${store[@]}" -q
            }
        fi
    fi
    # The cuDNN comparison (issue 27, item 1): pip's cuDNN against the
    # system's, each loaded alone.
    if want compare && gpu_or_skip compare_model compare_conv; then
        rerun_hint=compare
        local pip_dir sys_dir=${CUDNN_SYSTEM_DIR:-/usr/lib/x86_64-linux-gnu}
        pip_dir=$("$py" - 2> /dev/null << 'PIPCUDNN'
import os
try:
    import nvidia
    for root in nvidia.__path__:
        d = os.path.join(os.path.realpath(root), "cudnn", "lib")
        if os.path.exists(os.path.join(d, "libcudnn.so.9")):
            print(d)
            break
except Exception:
    pass
PIPCUDNN
        )
        echo "pip: ${pip_dir:-(none)}; system: $sys_dir" > "$logs/compare-folders.txt"
        for f in "$pip_dir"/libcudnn* "$sys_dir"/libcudnn*; do
            [ -e "$f" ] && ls -la "$f"
        done >> "$logs/compare-folders.txt" 2>&1
        if [ -z "$pip_dir" ] || [ ! -e "$sys_dir/libcudnn.so.9" ] \
            || [ "$(cd "$pip_dir" && pwd -P)" = "$(cd "$sys_dir" && pwd -P)" ]; then
            for n in compare_model compare_conv; do
                record "$n" "skipped: needs two cuDNN folders (pip's: ${pip_dir:-none}; $sys_dir/libcudnn.so.9: $( [ -e "$sys_dir/libcudnn.so.9" ] && echo found || echo none))" 0
            done
        else
            grep -E 'resnet50:(conv1|layer1\.0\.conv2|layer2\.0\.conv1|layer3\.1\.conv2|layer4\.0\.conv3)"' \
                "$root/src/problem/lists/resnet50.txt" > "$logs/compare-layers.txt"
            run compare_model 30 120 "$bin" compare --cudnn "$pip_dir" --cudnn "$sys_dir" --format md -- \
                model resnet50 --device gpu --dtype f16 --layout nhwc --batch 256 --warmup 3 --iters 10 \
                "${store[@]}"
            run compare_conv 15 90 "$bin" compare --cudnn "$pip_dir" --cudnn "$sys_dir" --format md -- \
                conv --from "$logs/compare-layers.txt" --batch 256 --device gpu --dtype f16 --layout nhwc \
                --dir FWD_D,BWD_D,BWD_W --algo auto --warmup 3 --iters 20 "${store[@]}"
        fi
    fi
    for g in "${garr[@]:1}"; do
        r50_group "$g"
    done
    # 9. The other three sanitizer tools over the training step, side by
    #    side, when 25 s are left.
    if want sanitize && gpu_or_skip racecheck_model initcheck_model synccheck_model; then
        rerun_hint=sanitize
        if [ -z "$cs" ]; then
            for tool in racecheck initcheck synccheck; do
                record "${tool}_model" "skipped: compute-sanitizer not found" 0
            done
        elif [ "$(left)" -lt 25 ]; then
            for tool in racecheck initcheck synccheck; do
                record "${tool}_model" "skipped: time budget ($(left) s left, 25 s needed)" 0 "rerun: sanitize"
            done
        else
            maxjobs=$(gpu_jobs 3)
            bg_cut="rerun: sanitize"
            for tool in racecheck initcheck synccheck; do
                bg "${tool}_model" 600 "$cs" --tool "$tool" --error-exitcode 1 "$bin" model resnet18 \
                    --device gpu --batch 8 --warmup 0 --iters 1 --no-save -q
            done
            bg_wait
            bg_cut=""
        fi
    fi
    "$py" "$here/summary.py" --per-layer "$logs/results" > "$logs/per-layer.md" 2>> "$logs/summary.err" || true
}

# --------------------------------------------------------------------------
# paths: issue 28's optional GPU paths (see the header).

# path_flags WORD: the command-line flags of a path word.
path_flags() {
    case $1 in
        default) ;;
        own-kernels) echo --own-kernels ;;
        fuse-bn) echo --fuse-bn ;;
        cuda-graph) echo --cuda-graph ;;
        api-graph) echo --api graph ;;
        api-auto) echo --api auto ;;
        fuse-bn-relu) echo --fuse-bn=relu ;;
        rnn-auto) echo --rnn-algo auto ;;
        rnn-small-h) echo --rnn-algo persist-static-small-h ;;
        all-bnrelu) echo --own-kernels --fuse-bn=relu --cuda-graph --api auto --rnn-algo auto ;;
        all) echo --own-kernels --fuse-bn --cuda-graph --api auto --rnn-algo auto ;;
        per-layer-all) echo --own-kernels --fuse-bn --api auto ;;
        own-bn) echo --own-bn --fuse-bn ;;
        own-bn-plain) echo --own-bn ;;
        all-own) echo --own-kernels --own-bn --fuse-bn --cuda-graph --api auto --rnn-algo auto ;;
        all-own-parts) echo --own-kernels --own-bn=parts --fuse-bn --cuda-graph --api auto --rnn-algo auto ;;
        per-layer-own) echo --own-kernels --own-bn=parts --fuse-bn --api auto ;;
        deterministic) echo --deterministic --api auto ;;
    esac
}

paths() {
    local wanted=" ${PATHS_STEPS:-check r50 per-layer keras} "
    # Every path word `check` checks; most telling first.
    local singles="all-own-parts all-own own-bn all-bnrelu own-kernels fuse-bn own-bn-plain fuse-bn-relu api-auto rnn-auto rnn-small-h cuda-graph api-graph deterministic"
    # The paths the r50 step times alone, both ways, while the budget
    # lasts: all-own-parts (the fastest on the H200 at 43e48bb) first, then those the
    # H200 run of 56f71b5 did not time (own-kernels, fuse-bn, cuda-graph
    # and api-graph alone are in its summary).
    local timed=${PATHS_SINGLES-all-own-parts own-bn own-bn-plain all-bnrelu api-auto fuse-bn-relu}
    local nogpu="skipped: no GPU" p dl dt l layers cs w n models
    local keras="mnist-mlp mnist-cnn cifar10-cnn imdb-fasttext imdb-bilstm lstm-text"
    local store=(--results "$logs/results")
    [ $gpu_listed = 1 ] && nogpu="skipped: the GPU is not usable (see the gpu step)"
    mkdir -p "$logs/check" "$logs/results"
    want() { case $wanted in *" $1 "*) return 0 ;; esac; return 1; }
    gpu_or_skip() {
        [ $usable = 1 ] && return 0
        local n
        for n in "$@"; do record "$n" "$nogpu" 0 "$why"; done
        return 1
    }
    cs=$(sanitizer)
    torch_ok=0
    if [ $usable = 1 ] && { want r50 || want keras || want per-layer || want goal; }; then
        "$py" -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' \
            > "$logs/torch.txt" 2>&1 && torch_ok=1
    fi
    pt_ready() {
        [ "$torch_ok" = 1 ] && return 0
        record "$1" "skipped: PyTorch not importable by $py" 0 "$(tail -n 1 "$logs/torch.txt" 2> /dev/null)"
        return 1
    }

    if want check; then
        rerun_hint=check
        local names="tests_gpu memcheck_all memcheck_all-own conv_api_f16_nhwc conv_api_f32_nchw conv_api_tf32_nchw"
        names="$names check_all_bf16 check_all_tf32 check_all-own_bf16 check_all-own_tf32"
        for p in $singles all; do
            case $p in
                rnn-*) names="$names check_${p}_f16_nhwc check_${p}_f32_nhwc" ;;
                *) names="$names check_${p}_f16_nhwc check_${p}_f32_nchw" ;;
            esac
        done
        # shellcheck disable=SC2086 # one name per word
        if gpu_or_skip $names; then
            maxjobs=$(gpu_jobs "${JOBS:-8}")
            layers=$(test_bin cnnbench_layers)
            if [ -z "$layers" ]; then
                record tests_gpu "FAILED: no cnnbench_layers test binary (run scripts/gpu/pack.sh)" 0
            else
                bg tests_gpu 240 sh -c 'exec "$@" 2>&1' sh env CNNBENCH_GPU_LIBS=required \
                    CNNBENCH_GPU=required "$layers" backend_tests real_libs cuda_programs backend::cuda \
                    ::cuda net::gpu --test-threads=2
            fi
            for p in all $singles; do
                for dl in f16:nhwc f32:nchw; do
                    dt=${dl%%:*}
                    l=${dl#*:}
                    # imdb-bilstm's recurrent layers run in NHWC only:
                    # check refuses it in NCHW.
                    models="--model resnet50 --model mnist-cnn --model imdb-fasttext"
                    [ "$l" = nhwc ] && models="$models --model imdb-bilstm"
                    # What the rnn-* words change is in the recurrent
                    # models alone, which run in NHWC.
                    case $p in
                        rnn-*)
                            models="--model imdb-bilstm --model lstm-text"
                            l=nhwc
                            ;;
                    esac
                    # shellcheck disable=SC2046,SC2086 # one flag / model per word
                    bg "check_${p}_${dt}_$l" 150 "$bin" check --device gpu $models --batch 2 --dtype "$dt" \
                        --layout "$l" --threads 2 --format json $(path_flags "$p")
                done
            done
            for dt in bf16 tf32; do
                for p in all all-own; do
                    # shellcheck disable=SC2046
                    bg "check_${p}_$dt" 150 "$bin" check --device gpu --model resnet50 --batch 2 --dtype "$dt" \
                        --layout nhwc --threads 2 --format json $(path_flags "$p")
                done
            done
            # tf32 NCHW: where the first run's GPU tests found --api graph's
            # weight gradients off; the JSON names each layer's engine.
            for dl in f16:nhwc f32:nchw tf32:nchw; do
                dt=${dl%%:*}
                l=${dl#*:}
                bg "conv_api_${dt}_$l" 150 "$bin" conv --from builtin:resnet50 --device gpu --dtype "$dt" \
                    --layout "$l" --batch 2 --check --api graph --threads 2 --iters 3 --warmup 1 \
                    --format json --out "$logs/check/conv_api_${dt}_$l.json" "${store[@]}" -q
            done
            for p in all all-own; do
                if [ -z "$cs" ]; then
                    record "memcheck_$p" "skipped: compute-sanitizer not found" 0
                else
                    # shellcheck disable=SC2046
                    bg "memcheck_$p" 180 "$cs" --tool memcheck --error-exitcode 1 "$bin" model resnet18 \
                        --device gpu --batch 8 --warmup 1 --iters 1 --no-save -q $(path_flags "$p")
                fi
            done
            bg_wait
        fi
    fi

    # p_run NAME PATH MODELS BATCH DTYPE [LAYOUT]: one cnnbench run, CSV
    # on stdout.
    p_run() {
        local name=$1 p=$2 models=$3 b=$4 dt=$5 l=${6:-nhwc} iters=20
        [ "$b" = 128 ] && iters=50
        # shellcheck disable=SC2046,SC2086 # one flag / model per word
        run "$name" 0 120 "$bin" model $models --device gpu --batch "$b" --dtype "$dt" --layout "$l" \
            --warmup 5 --iters "$iters" --format csv "${store[@]}" -q $(path_flags "$p")
    }
    p_pt() {
        local name=$1 models=$2 b=$3 dt=$4 l=${5:-nhwc} iters=20
        [ "$b" = 128 ] && iters=50
        pt_ready "$name" || return 0
        # shellcheck disable=SC2086
        run "$name" 0 150 "$py" "$root/scripts/peers/pytorch_model.py" $models --device cuda --batch "$b" \
            --dtype "$dt" --layout "$l" --warmup 5 --iters "$iters"
    }
    # Issue 28's goal table past f16 NHWC: ResNet-50 with every path and
    # --own-bn=parts (all-own-parts, or GOAL_PATH's) beside PyTorch, ABBA,
    # per batch:dtype:layout group.
    if want goal && gpu_or_skip goal_paths; then
        rerun_hint=goal
        local g gb gd gl gp=${GOAL_PATH:-all-own-parts}
        if [ -z "$(path_flags "$gp")" ]; then
            record goal_paths "FAILED: GOAL_PATH '$gp' is not a path word (all, all-own, own-bn, ...)" 0
            gp=""
        fi
        for g in ${gp:+${GOAL_GROUPS:-256:bf16:nhwc 128:tf32:nhwc 64:f32:nhwc 256:f16:nchw}}; do
            IFS=: read -r gb gd gl <<< "$g"
            rerun_hint="goal $g"
            if [ "$(left)" -lt 70 ]; then
                record "goal_${gb}_${gd}_$gl" "skipped: time budget ($(left) s left, about 70 s needed)" 0 \
                    "rerun: goal $g"
                continue
            fi
            p_run "p_${gp}_goal-$gb-$gd-${gl}_1" "$gp" resnet50 "$gb" "$gd" "$gl"
            p_pt "p_pt_goal-$gb-$gd-${gl}_1" resnet50 "$gb" "$gd" "$gl"
            p_pt "p_pt_goal-$gb-$gd-${gl}_2" resnet50 "$gb" "$gd" "$gl"
            p_run "p_${gp}_goal-$gb-$gd-${gl}_2" "$gp" resnet50 "$gb" "$gd" "$gl"
        done
    fi
    if want r50 && gpu_or_skip r50_paths; then
        rerun_hint=r50
        for w in $timed; do
            if [ -z "$(path_flags "$w")" ]; then
                record r50_singles "FAILED: PATHS_SINGLES word '$w' is not a path word (own-bn, api-auto, ...)" 0
                timed=""
            fi
        done
        if [ "$(left)" -lt 60 ]; then
            record r50_paths "skipped: time budget ($(left) s left, about 110 s needed)" 0 "rerun: r50"
        else
            p_run p_default_r50_1 default resnet50 256 f16
            p_run p_all-own_r50_1 all-own resnet50 256 f16
            p_run p_all_r50_1 all resnet50 256 f16
            p_pt p_pt_r50_1 resnet50 256 f16
            p_pt p_pt_r50_2 resnet50 256 f16
            p_run p_all_r50_2 all resnet50 256 f16
            p_run p_all-own_r50_2 all-own resnet50 256 f16
            p_run p_default_r50_2 default resnet50 256 f16
            # What the later steps need of the budget: the singles stop
            # short of it.
            local reserve=20
            want per-layer && reserve=$((reserve + 110))
            want keras && reserve=$((reserve + 70))
            for p in $timed; do
                [ "$(left)" -lt $((reserve + 20)) ] && break
                p_run "p_${p}_r50_1" "$p" resnet50 256 f16
            done
            for w in $(echo "$timed" | tr ' ' '\n' | tac); do
                [ -f "$logs/p_${w}_r50_1.out" ] || continue
                [ "$(left)" -lt $((reserve + 20)) ] && break
                p_run "p_${w}_r50_2" "$w" resnet50 256 f16
            done
        fi
    fi
    # per-layer, first part: what this run's paths need to be judged (the
    # bandwidth, the default and own batch norm steps, the two models the
    # Keras goal waits on); the rest after keras.
    if want per-layer && gpu_or_skip bandwidth per_layer_default per_layer_own per_layer_fasttext_own \
        per_layer_bilstm per_layer_bilstm_auto; then
        rerun_hint=per-layer
        # The measured copy against the nominal bandwidth (info.json, read
        # at the start): within 60-102%.
        run bandwidth 0 30 "$py" -c 'import json, sys
b = json.load(open(sys.argv[1]))["gpu"]["bandwidth"]
print(b)
assert 0.6 * b["nominal_gbs"] < b["measured_gbs"] <= 1.02 * b["nominal_gbs"], b' "$logs/info.json"
        run per_layer_default 20 90 "$bin" model resnet50 --device gpu --batch 256 --dtype f16 --layout nhwc \
            --warmup 3 --iters 10 --per-layer --format json "${store[@]}" -q
        # shellcheck disable=SC2046
        run per_layer_own 20 90 "$bin" model resnet50 --device gpu --batch 256 --dtype f16 --layout nhwc \
            --warmup 3 --iters 10 --per-layer --format json "${store[@]}" -q $(path_flags per-layer-own)
        # imdb-fasttext's step was its global average pooling's backward:
        # cuDNN's (3.0 ms on the H200), against --own-kernels' gather.
        run per_layer_fasttext_own 10 60 "$bin" model imdb-fasttext --device gpu --batch 128 --dtype f32 \
            --warmup 3 --iters 20 --per-layer --format json "${store[@]}" -q --own-kernels
        # imdb-bilstm trailed PyTorch (0.81x with --cuda-graph on the
        # H200): its layers on cuDNN's standard algorithm and with
        # --rnn-algo auto (PyTorch runs an LSTM of hidden size 64 on
        # persist-static-small-h; cuDNN's RNN also reads cnnbench's
        # batch-major sequence, PyTorch's time-major one).
        run per_layer_bilstm 10 60 "$bin" model imdb-bilstm --device gpu --batch 128 --dtype f32 \
            --warmup 3 --iters 20 --per-layer --format json "${store[@]}" -q
        run per_layer_bilstm_auto 10 60 "$bin" model imdb-bilstm --device gpu --batch 128 --dtype f32 \
            --warmup 3 --iters 20 --per-layer --format json "${store[@]}" -q --rnn-algo auto
    fi
    if want keras && gpu_or_skip keras_paths; then
        rerun_hint=keras
        if [ "$(left)" -lt 30 ]; then
            record keras_paths "skipped: time budget ($(left) s left, about 40 s needed)" 0 "rerun: keras"
        else
            p_run p_default_keras_1 default "$keras" 128 f32
            p_run p_cuda-graph_keras_1 cuda-graph "$keras" 128 f32
            p_run p_all_keras_1 all "$keras" 128 f32
            p_pt p_pt_keras_1 "$keras" 128 f32
            p_pt p_pt_keras_2 "$keras" 128 f32
            p_run p_all_keras_2 all "$keras" 128 f32
            p_run p_cuda-graph_keras_2 cuda-graph "$keras" 128 f32
            p_run p_default_keras_2 default "$keras" 128 f32
        fi
    fi
    # per-layer, second part, with what the budget leaves: the paths
    # without --own-bn and fasttext without --own-kernels (both measured
    # at 56f71b5 already), then PyTorch's own per-op device time of the
    # same steps (three tables on stderr), imdb-bilstm's first.
    if want per-layer && gpu_or_skip per_layer_paths per_layer_fasttext_default pt_profile_bilstm pt_profile; then
        rerun_hint=per-layer
        # shellcheck disable=SC2046
        run per_layer_paths 20 90 "$bin" model resnet50 --device gpu --batch 256 --dtype f16 --layout nhwc \
            --warmup 3 --iters 10 --per-layer --format json "${store[@]}" -q $(path_flags per-layer-all)
        run per_layer_fasttext_default 10 60 "$bin" model imdb-fasttext --device gpu --batch 128 --dtype f32 \
            --warmup 3 --iters 20 --per-layer --format json "${store[@]}" -q
        pt_ready pt_profile_bilstm && run pt_profile_bilstm 15 60 "$py" \
            "$root/scripts/peers/pytorch_model.py" imdb-bilstm --device cuda --batch 128 --dtype f32 \
            --warmup 3 --iters 20 --profile
        pt_ready pt_profile && run pt_profile 40 150 "$py" "$root/scripts/peers/pytorch_model.py" resnet50 \
            --device cuda --batch 256 --dtype f16 --layout nhwc --warmup 3 --iters 10 --profile
    fi
    if want f32 && gpu_or_skip f32_api; then
        rerun_hint=f32
        # The first H200 run: 67 s with --api graph's planning (27 s a run);
        # auto plans both ways.
        if [ "$(left)" -lt 80 ]; then
            record f32_api "skipped: time budget ($(left) s left, about 90 s needed)" 0 "rerun: f32"
        else
            p_run p_default_f32_1 default resnet50 64 f32
            p_run p_api-auto_f32_1 api-auto resnet50 64 f32
            p_run p_api-auto_f32_2 api-auto resnet50 64 f32
            p_run p_default_f32_2 default resnet50 64 f32
        fi
    fi
    if want conv && gpu_or_skip conv_legacy_f32 conv_graph_f32; then
        rerun_hint=conv
        for w in legacy graph; do
            run "conv_${w}_f32" 20 120 "$bin" conv --from builtin:resnet50 --device gpu --batch 64 \
                --dtype f32 --layout nhwc --dir FWD_D,BWD_D,BWD_W --api "$w" --warmup 3 --iters 10 \
                --format json --out "$logs/conv_${w}_f32.json" "${store[@]}" -q
        done
    fi
    if want normconv && gpu_or_skip normconv_check normconv_check_bf16 normconv_f16 conv_graph_normconv_f16; then
        rerun_hint=normconv
        # NormConv's three fused graphs (not yet in the network): checked
        # at batch 2, then timed at 256 beside the plain convolutions on
        # the graph API. Runtime fusion compiles each configuration it
        # plans (the first 4 per shape and direction): seconds each.
        local nlayers="$here/normconv-layers.txt"
        # cuDNN's own log of warnings and errors (level 2) says why an
        # engine refuses a graph.
        run normconv_check 90 300 env CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$logs/normconv_cudnn_f16.log" \
            "$bin" conv --from "$nlayers" --device gpu --batch 2 --dtype f16 \
            --layout nhwc --dir all --norm-conv --check --warmup 1 --iters 3 \
            --format json --out "$logs/check/normconv_check.json" "${store[@]}" -q
        # bf16 too: which graphs runtime fusion takes in each half type.
        run normconv_check_bf16 90 300 env CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$logs/normconv_cudnn_bf16.log" \
            "$bin" conv --from "$nlayers" --device gpu --batch 2 --dtype bf16 \
            --layout nhwc --dir all --norm-conv --check --warmup 1 --iters 3 \
            --format json --out "$logs/check/normconv_check_bf16.json" "${store[@]}" -q
        run normconv_f16 150 420 "$bin" conv --from "$nlayers" --device gpu --batch 256 --dtype f16 \
            --layout nhwc --dir all --norm-conv --warmup 3 --iters 20 \
            --format json --out "$logs/normconv_f16.json" "${store[@]}" -q
        run conv_graph_normconv_f16 40 200 "$bin" conv --from "$nlayers" --device gpu --batch 256 \
            --dtype f16 --layout nhwc --dir FWD_D,BWD_D,BWD_W --api graph --warmup 3 --iters 20 \
            --format json --out "$logs/conv_graph_normconv_f16.json" "${store[@]}" -q
    fi
    "$py" "$here/summary.py" --per-layer "$logs/results" > "$logs/per-layer.md" 2>> "$logs/summary.err" || true
}

case $part in
    quick) quick ;;
    paths) paths ;;
    1) part1 ;;
    2)
        if [ $usable = 0 ]; then
            say "no usable GPU ($why): part 2 needs one; nothing run"
            [ $status = 0 ] && status=2
            finish
        fi
        part2
        ;;
    3 | 4)
        if [ $usable = 0 ]; then
            say "no usable GPU ($why): part $part needs one; nothing run"
            [ $status = 0 ] && status=2
            finish
        fi
        if [ "$part" = 3 ]; then part3; else part4; fi
        ;;
esac
finish
