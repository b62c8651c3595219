#!/usr/bin/env bash
# Two cnnbench binaries side by side on one GPU, ABBA: the same `model`
# command run with binary A, B, B, A (ROUNDS times that order), each
# run's median step kept, then each binary's median of its runs and the
# ratio A ms / B ms (above 1: B is faster). For a kernel change measured
# against the build before it, on the same warm machine:
#
#   scripts/gpu/ab.sh OUT A_BIN B_BIN -- resnet50 --device gpu --batch 256 ...
#
# Writes OUT/ab.md (the table and every command) and OUT/ab-*.json (each
# run's records). Without a usable GPU each run fails in one line and the
# table says so. ROUNDS (default 1) repeats the ABBA block.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1 a=$2 b=$3
shift 3
[ "${1:-}" = "--" ] && shift
mkdir -p "$out"
# shellcheck source=scripts/gpu/env.sh
. "$here/env.sh"
rounds=${ROUNDS:-1}
md="$out/ab.md"
{
    echo "# A/B: \`cnnbench model $*\`"
    echo
    echo "- A: $a ($(sha256sum "$a" 2> /dev/null | cut -c1-12))"
    echo "- B: $b ($(sha256sum "$b" 2> /dev/null | cut -c1-12))"
    echo "- order: A, B, B, A, $rounds time(s); each run's median step (total_ms)"
    echo
} > "$md"
k=0
for _ in $(seq "$rounds"); do
    for which in A B B A; do
        k=$((k + 1))
        bin=$a
        [ "$which" = B ] && bin=$b
        json="$out/ab-$k-$which.json"
        if ! "$bin" model "$@" --format json --out "$json" -q 2> "$out/ab-$k-$which.err"; then
            echo "- run $k ($which) failed: $(tail -n 1 "$out/ab-$k-$which.err")" >> "$md"
        fi
    done
done
python3 - "$out" >> "$md" << 'EOF'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
runs = {"A": [], "B": []}
for path in sorted(glob.glob(os.path.join(out, "ab-*.json"))):
    which = re.search(r"-([AB])\.json$", path).group(1)
    try:
        recs = json.load(open(path)).get("records", [])
    except (OSError, ValueError):
        continue
    for r in recs:
        ms = (r.get("total_ms") or {}).get("median")
        if ms:
            runs[which].append(ms)
print("| binary | runs (ms) | median ms | A ms / B ms |")
print("|---|---|---:|---:|")
med = {w: statistics.median(v) if v else None for w, v in runs.items()}
for w in "AB":
    ratio = f"{med['A'] / med[w]:.3f}" if med["A"] and med[w] else "-"
    shown = ", ".join(f"{v:.3f}" for v in runs[w]) or "none"
    print(f"| {w} | {shown} | {med[w] or 0:.3f} | {ratio} |")
EOF
cat "$md"
