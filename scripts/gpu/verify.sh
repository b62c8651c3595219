#!/usr/bin/env bash
# GPU verification in three runs (issue 13), for a GPU machine that is lent
# now and then (30 device-minutes a session, 10 minutes and 8 returned files
# a command) and has Python with PyTorch, pip's NVIDIA libraries,
# compute-sanitizer, but no Rust: build with scripts/gpu/pack.sh elsewhere,
# copy gpu-pack/ with the checkout, then run each part as one command:
#
#   scripts/gpu/verify.sh PART OUTDIR          PART: 1, 2 or 3
#
# Each part is meant to take under 8 minutes on an H100 with 16 cores, and
# leaves at most 8 files in OUTDIR: partN-summary.md (markdown for the
# README, ending with a closing note), partN-logs.tar.gz (every log, JSON,
# CSV and results-store file) and a few small key files. Both are rewritten
# after every step, so a run stopped half-way still returns what it did.
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
#   - compute-sanitizer memcheck (--error-exitcode 1) over one resnet18
#     training step at batch 8 on the GPU, and over `conv --algo all --check`
#     on one small problem in f32 NCHW and f16 NHWC; its ERROR SUMMARY lines;
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
#     (in two processes of about half the models each, so a process cut
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
#
# Environment: PACK (default gpu-pack; without it, target/release/cnnbench
# and target/release/deps), CNNBENCH (the binary), PYTHON (default python3),
# BUDGET_S (seconds after which no step starts, default 400; a step is cut
# at most GRACE_S=45 s later, so a part ends within 8 min), JOBS, CHECK_THREADS, CHECK_BATCH,
# CHECK_TIMEOUT (part 3, default 240), CHECK_FULL, CHECK_PART, CHECK_SUBSET,
# SKIP_CHECK=1 (part 3), MODEL, MODEL_GROUPS.
# Exit status: 0 when every step that ran passed (skipped steps are named in
# the summary), 1 when one failed or timed out, 2 when part 2 or 3 finds no
# usable GPU (nothing run), 64 on bad usage.
# shellcheck source-path=SCRIPTDIR
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
usage() {
    echo "usage: scripts/gpu/verify.sh PART OUTDIR    (PART: 1, 2 or 3; see the header of this script)" >&2
    exit 64
}
[ $# -eq 2 ] || usage
part=$1
out=$2
case $part in 1 | 2 | 3) ;; *) usage ;; esac

pack=${PACK:-$root/gpu-pack}
py=${PYTHON:-python3}
budget=${BUDGET_S:-400}
grace=${GRACE_S:-45}
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
rm -f "$out/part$part-"* "$out/.part$part-"*
work=$(mktemp -d "${TMPDIR:-/tmp}/cnnbench-verify.XXXXXX") || exit 1
logs=$work/part$part-logs
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
# run NAME NEED CAP CMD...: runs CMD (stdout NAME.out, stderr NAME.err in the
# logs) when at least NEED seconds of the budget are left, for at most CAP
# seconds (less when the budget ends sooner). Returns CMD's status, or 3 when
# skipped.
run() {
    local name=$1 need=$2 cap=$3 l t t0 rc
    shift 3
    l=$(left)
    if [ "$l" -lt "$need" ]; then
        record "$name" "skipped: time budget ($l s left, about $need s needed)" 0
        return 3
    fi
    t=$cap
    [ "$t" -gt $((l + grace)) ] && t=$((l + grace))
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
        record "$name" "skipped: time budget ($l s left)" 0
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
bg_wait() {
    local n st secs
    wait
    for n in $bg_names; do
        if [ -f "$logs/$n.rc" ]; then
            IFS=$'\t' read -r _ st secs < "$logs/$n.rc"
            rm -f "$logs/$n.rc"
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
    1) key_files="info.txt info.json" ;;
    2) key_files="r50-algos.md" ;;
    3) key_files="per-layer.md" ;;
esac
checkpoint() {
    local f
    if command -v "$py" > /dev/null 2>&1 \
        && "$py" "$here/summary.py" --part "$part" "$logs" > "$out/.part$part-summary.md" 2>> "$logs/summary.err"; then
        :
    else
        { # No Python: the steps alone.
            echo "# cnnbench GPU verification, part $part"
            echo
            echo "(summary.py failed or Python is missing: see summary.err in the logs)"
            echo
            echo "| step | result | s |"
            echo "|---|---|---:|"
            while IFS=$'\t' read -r n st secs _; do echo "| $n | $st | $secs |"; done < "$steps"
        } > "$out/.part$part-summary.md"
    fi
    mv -f "$out/.part$part-summary.md" "$out/part$part-summary.md"
    cp -f "$out/part$part-summary.md" "$logs/summary.md"
    for f in $key_files; do
        [ -f "$logs/$f" ] && cp -f "$logs/$f" "$out/part$part-$f"
    done
    tar -czf "$out/.part$part-logs.tar.gz" -C "$work" "part$part-logs" 2> /dev/null \
        && mv -f "$out/.part$part-logs.tar.gz" "$out/part$part-logs.tar.gz"
}
finish() {
    checkpoint
    rm -rf "$work"
    say "part $part done in $((SECONDS - t_start)) s: $out/part$part-summary.md, $out/part$part-logs.tar.gz (exit $status)"
    exit "$status"
}
# shellcheck disable=SC2046 # one PID per word
trap 'say "interrupted"; kill $(jobs -p) 2> /dev/null; status=130; finish' INT TERM

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
say "part $part: $bin; logs in $work until the end, then $out"

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
    local names="memcheck_model memcheck_conv_f32_nchw memcheck_conv_f16_nhwc"
    if [ $usable = 0 ]; then
        for name in $names; do record "$name" "skipped: no GPU" 0 "$why"; done
    elif [ -z "$cs" ]; then
        for name in $names; do record "$name" "skipped: compute-sanitizer not found" 0; done
    else
        local msan=("$cs" --tool memcheck --error-exitcode 1 --print-limit 50)
        run memcheck_model 60 240 "${msan[@]}" "$bin" model resnet18 --device gpu --batch 8 \
            --warmup 0 --iters 1 --workspace-limit 512M --no-save -q
        run memcheck_conv_f32_nchw 40 150 "${msan[@]}" "$bin" conv mb4ic32ih28oc64oh28kh3ph1 \
            --device gpu --dtype f32 --layout nchw --dir all --algo all --check --iters 1 --warmup 0 \
            --no-save -q
        run memcheck_conv_f16_nhwc 40 150 "${msan[@]}" "$bin" conv mb4ic32ih28oc64oh28kh3ph1 \
            --device gpu --dtype f16 --layout nhwc --dir all --algo all --check --iters 1 --warmup 0 \
            --no-save -q
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
# Part 3: whole models.

part3() {
    local dt g b longest=60 t0 m model=${MODEL:-resnet50}
    local subset_args=()
    for m in ${CHECK_SUBSET:-alexnet googlenet resnet50}; do subset_args+=(--model "$m"); done
    # An empty list would mean every model to `check`.
    [ ${#subset_args[@]} -gt 0 ] || subset_args=(--model alexnet)
    mkdir -p "$logs/results" "$logs/models"
    if "$py" -c 'import torch' > /dev/null 2>&1; then
        "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
torch.backends.cudnn.version(), "device", torch.cuda.get_device_name() if torch.cuda.is_available() else None)' \
            > "$logs/torch.txt" 2>&1
        torch_ok=1
    else
        "$py" -c 'import torch' > "$logs/torch.txt" 2>&1
        torch_ok=0
    fi
    # 1. check per dtype, side by side (no timings are taken); every model
    #    in two halves (a cut-short process loses only its half).
    if [ -z "${SKIP_CHECK:-}" ]; then
        local all half1=() half2=() i=0 n ct
        all=$("$bin" model --help 2> /dev/null | sed -n 's/^Models: *//p')
        [ -n "$all" ] || all="alexnet googlenet inception-v3 vgg16 vgg19 resnet18 resnet34 resnet50 resnet101 resnet152 resnet200"
        n=$(echo "$all" | wc -w)
        for m in $all; do
            if [ $i -lt $(((n + 1) / 2)) ]; then half1+=(--model "$m"); else half2+=(--model "$m"); fi
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
        if [ $torch_ok = 0 ]; then
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

case $part in
    1) part1 ;;
    2)
        if [ $usable = 0 ]; then
            say "no usable GPU ($why): part 2 needs one; nothing run"
            [ $status = 0 ] && status=2
            finish
        fi
        part2
        ;;
    3)
        if [ $usable = 0 ]; then
            say "no usable GPU ($why): part 3 needs one; nothing run"
            [ $status = 0 ] && status=2
            finish
        fi
        part3
        ;;
esac
finish
