#!/usr/bin/env bash
# One command for a GPU machine (issue 4): whole models on the GPU.
#   1. `cnnbench check --device gpu` on every model at batch 2, for each
#      dtype (against the CPU's fast layers);
#   2. resnet50 training steps at batch 16 and 64 for f32, tf32 and f16
#      NHWC, cnnbench beside PyTorch eager (cudnn.benchmark=True), in
#      alternating order (cnnbench, PyTorch, PyTorch, cnnbench);
#   3. a markdown table of the medians and ratios, printed last.
#
#   scripts/gpu/model.sh [OUT_DIR]        (default: gpu-model-out)
#
# CNNBENCH=path/to/cnnbench overrides the binary (default
# target/release/cnnbench), PYTHON the interpreter with PyTorch (default
# python3). CHECK_DTYPES, DTYPES, BATCHES and MODELS narrow the runs, e.g.
# CHECK_DTYPES=f32 DTYPES=f16 BATCHES=64. SKIP_CHECK=1 skips step 1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${CNNBENCH:-$here/../../target/release/cnnbench}
py=${PYTHON:-python3}
out=${1:-gpu-model-out}
check_dtypes=${CHECK_DTYPES:-f32 tf32 f16 bf16}
dtypes=${DTYPES:-f32 tf32 f16}
batches=${BATCHES:-16 64}
models=${MODELS:-resnet50}
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
. "$here/env.sh"

# shellcheck source=scripts/gpu/common.sh
. "$here/common.sh"
require_gpu "$bin" "$out" "gpu-model: no usable GPU; nothing run"

status=0
log() { echo "$*" | tee -a "$out/runs.txt"; }

if [ -z "${SKIP_CHECK:-}" ]; then
    for dt in $check_dtypes; do
        t0=$SECONDS
        "$bin" check --device gpu --model all --batch 2 --dtype "$dt" --layout nhwc \
            > "$out/check_$dt.txt" 2> "$out/check_$dt.err"
        rc=$?
        "$bin" check --device gpu --model all --batch 2 --dtype "$dt" --layout nhwc \
            --format json > "$out/check_$dt.json" 2>/dev/null || true
        log "check $dt: exit $rc ($((SECONDS - t0)) s)"
        [ $rc -eq 0 ] || status=1
    done
fi

cn() { # model batch dtype tag
    # CSV for the summary; the store file (JSON, with the per-layer table)
    # goes to $out/results.
    "$bin" model "$1" --device gpu --batch "$2" --dtype "$3" --layout nhwc \
        --format csv --out "$out/cn_$1_$2_$3_$4.csv" -q --per-layer \
        --results "$out/results" 2> "$out/cn_$1_$2_$3_$4.err"
    local rc=$?
    log "cnnbench $1 b$2 $3 ($4): exit $rc"
    [ $rc -eq 0 ] || status=1
}
pt() {
    "$py" "$here/../peers/pytorch_model.py" "$1" --device cuda --batch "$2" --dtype "$3" \
        --layout nhwc > "$out/pt_$1_$2_$3_$4.csv" 2> "$out/pt_$1_$2_$3_$4.err"
    local rc=$?
    log "pytorch $1 b$2 $3 ($4): exit $rc"
    [ $rc -eq 0 ] || status=1
}
for m in $models; do
    for b in $batches; do
        for dt in $dtypes; do
            cn "$m" "$b" "$dt" 1
            pt "$m" "$b" "$dt" 1
            pt "$m" "$b" "$dt" 2
            cn "$m" "$b" "$dt" 2
        done
    done
done

"$py" - "$out" <<'PY' | tee "$out/summary.md"
import csv, glob, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*_*_*_*_[12].csv"))):
    tool, model, batch, dtype, rnd = os.path.basename(path)[:-4].split("_")
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get("status") == "ok" and r.get("total_ms_median"):
                rows.setdefault((model, int(batch), dtype), {}).setdefault(tool, []).append(
                    float(r["total_ms_median"]))
print("| model | batch | dtype | cnnbench step ms (rounds) | PyTorch step ms (rounds) | cnnbench / PyTorch |")
print("|---|---:|---|---:|---:|---:|")
for (m, b, d), t in sorted(rows.items()):
    c, p = t.get("cn", []), t.get("pt", [])
    ratio = f"{min(c) / min(p):.2f}x" if c and p else "n/a"
    fmt = lambda v: " / ".join(f"{x:.2f}" for x in v) or "n/a"
    print(f"| {m} | {b} | {d} | {fmt(c)} | {fmt(p)} | {ratio} |")
for name in sorted(glob.glob(os.path.join(out, "check_*.txt"))):
    print(f"\n{os.path.basename(name)}:\n")
    print(open(name).read())
PY
exit $status
