#!/usr/bin/env bash
# The third call of the 2026-11-27 H200 session: the cross-network tests
# with the process-wide convolution choices, the checks of the paths the
# check's fix had not yet run on, then ResNet-50 f16 batch 256 with every
# path: the session's first binary (gpu-pack/cnnbench-base) against this
# one (own-kernel gradient sums, the BN sums' two rows), ABBA.
set -u
out=$1
mkdir -p "$out/logs"
. scripts/gpu/env.sh
B=gpu-pack/cnnbench
L="$out/logs"
( env CNNBENCH_GPU_LIBS=required CNNBENCH_GPU=required gpu-pack/tests/cnnbench_layers \
    a_hooked_step a_world_of_one graph_steps_train residual_blocks_match every_op_matches \
    --test-threads=2 > "$L/tests.txt" 2>&1; echo "exit $?" >> "$L/tests.txt" ) &
chk() {
    local name=$1
    shift
    "$B" check --device gpu --model resnet50 --batch 2 --layout nhwc --threads 2 --format json "$@" \
        > "$L/check_$name.json" 2> "$L/check_$name.err"
    echo "check_$name: exit $?" >> "$L/checks.txt"
}
chk fuse-bn-relu_f16 --dtype f16 --fuse-bn=relu &
chk all_f16 --dtype f16 --own-kernels --fuse-bn --cuda-graph --api auto &
chk all-own_f16 --dtype f16 --own-kernels --own-bn --fuse-bn --cuda-graph --api auto &
chk own-kernels_f32 --dtype f32 --own-kernels &
wait
paths="--own-kernels --own-bn --fuse-bn --cuda-graph --api auto"
# shellcheck disable=SC2086
ROUNDS=1 scripts/gpu/ab.sh "$out/ab" gpu-pack/cnnbench-base "$B" -- resnet50 --device gpu --dtype f16 \
    --layout nhwc --batch 256 --warmup 5 --iters 20 $paths > /dev/null 2>&1
cp "$out/ab/ab.md" "$out/ab.md"
tar czf "$out/logs.tgz" -C "$out" logs ab
cat "$L/checks.txt"; grep -E "^test |panicked|off by|exit" "$L/tests.txt" | tail -n 30; cat "$out/ab.md"
