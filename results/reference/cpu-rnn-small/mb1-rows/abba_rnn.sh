#!/bin/bash
# ABBA of two cnnbench binaries on rnn problems: prints each pass's median per binary per round
A=$1; B=$2; shift 2
for p in "$@"; do
  for r in 1 2 3 4 5 6 7 8; do
    if [ $((r % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
    for bin in $order; do
      $bin rnn $p --threads ${THREADS:-2} --iters 30 --warmup 3 --dir fwd --format csv -q --no-save 2>/dev/null | python3 -c "
import csv,sys
for r in csv.DictReader(sys.stdin): print('$bin'.split('-')[-1], r['problem'], r['dir'], r['ms_median'])"
    done
  done
done
