#!/usr/bin/env bash
# Builds cnnbench and its test binaries on a machine with Rust (no GPU
# needed) and packs them for a GPU machine that has no Rust toolchain:
#
#   scripts/gpu/pack.sh [DIR]             (default DIR: gpu-pack, git-ignored)
#
# Runs `cargo build --release --locked` and
# `cargo test --release --workspace --locked --no-run`, then writes
#   DIR/cnnbench                 the CLI (target/release/cnnbench)
#   DIR/tests/<crate>            the unit-test binaries of each lib and bin:
#                                cnnbench_layers, cnnbench_kernels and
#                                cnnbench_bin (src/main.rs's tests)
#   DIR/tests/<name>             integration tests under 16 MiB that do not
#                                run the CLI: a test that calls
#                                env!("CARGO_BIN_EXE_cnnbench") has this
#                                machine's path to the binary compiled in, so
#                                it is left out (tests/cli.rs, cli_model.rs)
#   DIR/MANIFEST                 git commit, date, toolchain, sizes
# Binaries are stripped where `strip` exists. Prints the total size, and
# exits 1 with one line if it is over 64 MiB (what the GPU machine takes
# besides the checkout). Honours CARGO_TARGET_DIR and CARGO.
# Then copy DIR with the checkout (the device tool: carry ["gpu-pack"]) and
# run scripts/gpu/verify.sh there.
set -u
set -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-gpu-pack}
cargo=${CARGO:-cargo}
limit=$((64 << 20))
cd "$root" || exit 1

fail() {
    echo "pack.sh: $*" >&2
    exit 1
}
command -v "$cargo" > /dev/null 2>&1 || fail "cargo not found (this machine needs Rust; the GPU machine does not)"
command -v python3 > /dev/null 2>&1 || fail "python3 not found (used to read cargo's JSON messages)"

t0=$SECONDS
echo "pack.sh: cargo build --release --locked" >&2
"$cargo" build --release --locked || fail "cargo build --release failed"
echo "pack.sh: cargo test --release --workspace --locked --no-run" >&2
"$cargo" test --release --workspace --locked --no-run || fail "cargo test --no-run failed"
# The same command again (nothing left to build) for the test binaries' paths.
list=$("$cargo" test --release --workspace --locked --no-run --message-format=json 2> /dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test"):
        continue
    exe, t = m.get("executable"), m["target"]
    if not exe:
        continue
    kind = t["kind"][0]
    name = t["name"] + ("_bin" if kind == "bin" else "")
    print("\t".join([kind, name, exe, t["src_path"]]))
') || fail "could not read the test binaries from cargo's JSON messages"
[ -n "$list" ] || fail "cargo listed no test binaries"

target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
cli=$target/release/cnnbench
[ -x "$cli" ] || fail "$cli was not built"

rm -rf "$dir"
mkdir -p "$dir/tests" || fail "cannot create $dir"
strip_it() {
    if command -v strip > /dev/null 2>&1; then strip "$1" 2> /dev/null || true; fi
}
cp "$cli" "$dir/cnnbench" || fail "cannot copy $cli"
strip_it "$dir/cnnbench"
left_out=""
while IFS=$'\t' read -r kind name exe src; do
    case $kind in
        lib | bin) ;;
        test)
            if grep -q 'CARGO_BIN_EXE_' "$src" 2> /dev/null; then
                left_out="$left_out $name (runs the CLI at this machine's path)"
                continue
            fi
            if [ "$(stat -c %s "$exe")" -gt $((16 << 20)) ]; then
                left_out="$left_out $name (over 16 MiB)"
                continue
            fi
            ;;
        *)
            left_out="$left_out $name ($kind)"
            continue
            ;;
    esac
    cp "$exe" "$dir/tests/$name" || fail "cannot copy $exe"
    strip_it "$dir/tests/$name"
done <<< "$list"

total=$(du -sb "$dir" | cut -f1)
{
    echo "cnnbench GPU pack (scripts/gpu/pack.sh)"
    if git diff --quiet HEAD -- '*.rs' '*.cu' '*.cuh' '*.h' 'Cargo.toml' '*/Cargo.toml' Cargo.lock build.rs 2> /dev/null; then
        built="sources as committed"
    else
        built="uncommitted changes to the Rust/CUDA sources built in"
    fi
    echo "commit   $(git rev-parse HEAD 2> /dev/null || echo unknown) ($built)"
    echo "date     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host     $(uname -srm)"
    echo "rustc    $(rustc --version 2> /dev/null || echo unknown)"
    echo "target   $target"
    echo "left out${left_out:- nothing}"
    echo "size     $total bytes"
    echo
    (cd "$dir" && find . -type f ! -name MANIFEST -printf '%s\t%p\n' | sort -k2)
} > "$dir/MANIFEST"
total=$(du -sb "$dir" | cut -f1)
mib=$(awk -v b="$total" 'BEGIN { printf "%.1f", b / 1048576 }')
if [ "$total" -gt "$limit" ]; then
    echo "pack.sh: $dir is $mib MiB, over the 64 MiB the GPU machine takes" >&2
    exit 1
fi
echo "pack.sh: $dir: $(find "$dir" -type f | wc -l) files, $mib MiB ($((SECONDS - t0)) s)${left_out:+; left out:$left_out}"
