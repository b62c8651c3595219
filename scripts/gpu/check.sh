#!/usr/bin/env bash
# One command for a GPU machine (issue 3): --check across dtype x layout x
# direction on builtin:resnet50 and on scripts/gpu/odd.txt, --algo all for
# two layers, and a summary printed last.
#
#   scripts/gpu/check.sh [OUT_DIR]        (default: gpu-check-out)
#
# CNNBENCH=path/to/cnnbench overrides the binary (default
# target/release/cnnbench). DTYPES and LAYOUTS narrow the matrix, e.g.
# DTYPES="f32 f16" LAYOUTS=nhwc.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${CNNBENCH:-$here/../../target/release/cnnbench}
out=${1:-gpu-check-out}
dtypes=${DTYPES:-f32 tf32 f16 bf16}
layouts=${LAYOUTS:-nchw nhwc}
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
. "$here/env.sh"

# shellcheck source=scripts/gpu/common.sh
. "$here/common.sh"
require_gpu "$bin" "$out" "gpu-check: no usable GPU; nothing checked"

status=0
run() { # name, then cnnbench arguments
    local name=$1
    shift
    local t0=$SECONDS
    "$bin" "$@" --format json --out "$out/$name.json" -q 2> "$out/$name.err"
    local rc=$?
    echo "$name: exit $rc ($((SECONDS - t0)) s)" | tee -a "$out/runs.txt"
    [ $rc -eq 0 ] || status=1
}

for dt in $dtypes; do
    for l in $layouts; do
        run "r50_${dt}_${l}" conv --from builtin:resnet50 --device gpu --dtype "$dt" --layout "$l" \
            --dir FWD_D,BWD_D,BWD_W --algo auto --check --warmup 3 --iters 20
        run "odd_${dt}_${l}" conv --from "$here/odd.txt" --device gpu --dtype "$dt" --layout "$l" \
            --dir all --algo heuristic --check --warmup 2 --iters 10
    done
done
for dt in f32 f16; do
    for p in mb16ic64ih56oc64oh56kh3ph1 mb16ic1024ih14oc256oh14kh1; do
        "$bin" conv "$p" --device gpu --dtype "$dt" --layout nhwc --dir FWD_D,BWD_D,BWD_W \
            --algo all --check --iters 20 -q > "$out/all_${dt}_$p.txt" 2>&1 || status=1
    done
done
run gemm_f16 gemm 8192x8192x8192 1760x128x1760 --device gpu --dtype f16 --check --iters 20
run gemm_f32 gemm 8192x8192x8192 1760x128x1760 --device gpu --dtype f32 --check --iters 20

python3 "$here/summary.py" "$out" | tee "$out/summary.md"
exit $status
