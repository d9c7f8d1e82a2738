#!/usr/bin/env bash
# Forty-seventh session (Zen 4 EPYC, 2 threads): bench_decode.py with the library before the
# change (BASE, 3b2f915: prefetcht0 everywhere) and after it (NEW: decode_prefetch_to_l2 picks
# prefetcht1 on this Zen 4), alternated B N N B, each process timing the streaming read, flashattn
# and torch CPU SDPA. Libraries: CPU-only Release builds (-DFLASHATTN_CUDA=OFF) of each commit.
# Usage: BASE=... NEW=... [ORDER="B N N B"] bash run.sh OUTDIR
set -euo pipefail
out=${1:-.}
export OMP_NUM_THREADS=2 PYTHONPATH=python:bench/cpu
i=0
for which in ${ORDER:-B N N B}; do
  if [ "$which" = B ]; then lib=$BASE tag=base; else lib=$NEW tag=new; fi
  FLASHATTN_LIBRARY=$lib python3 bench/cpu/bench_decode.py "$out/decode-$i-$tag.csv" > "$out/decode-$i-$tag.log" 2>&1
  echo "run $i $tag done"; i=$((i + 1))
done
