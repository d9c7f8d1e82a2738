#!/usr/bin/env bash
# Fiftieth session, first device call: on an H200 only (elsewhere it stops after nvidia-smi),
# the kernels of HEAD (f897610; build-full's library of the forty-ninth session, whose CUDA code
# is HEAD's, carried as build-lead/s49/lib.xz):
#   (1) three bench_fp8.py processes: issue 9's fp8 / bf16 ratio with the forty-sixth session's
#       change (padded head-dim-128 fp8 calls on the per-sequence kernel, measured on H100s only);
#   (2) one bench_decode.py process (issue 8's decode grid at head dim 128);
#   (3) up to three bench_peers.py processes (DESIGN.md's grid, issues 4-6) and grid_median.py.
# Run from the repository root with $OUT set; logs.tgz comes back.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_COMMIT=f897610
xz -dc build-lead/s49/lib.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
case "$name" in
*H200*)
  for r in 0 1 2; do
    timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
  done
  grep -h ',16384,' $L/fp8-r*.csv | grep -v sdpa
  timeout 150 python3 bench/gpu/bench_decode.py $L/decode-d128.csv > $L/decode-d128.log 2>&1; echo "decode rc=$? t=$((SECONDS-t0))"
  grep -E '^flashattn|^torch' $L/decode-d128.csv | cut -d, -f1-3,14-16 | head -40
  for r in 0 1 2; do
    [ $((SECONDS - t0)) -lt 420 ] || break
    timeout 150 python3 bench/gpu/bench_peers.py $L/peers-r$r.csv > $L/peers-r$r.log 2>&1; echo "peers run $r rc=$? t=$((SECONDS-t0))"
  done
  python3 bench/gpu/grid_median.py $L/peers-r*.csv > $L/grid-median.md 2>&1; echo "median rc=$?"
  ;;
*) echo "not an H200: nothing run" ;;
esac
cd $OUT && tar czf logs.tgz logs && rm -rf logs
