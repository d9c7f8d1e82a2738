#!/usr/bin/env bash
# DESIGN.md's forward grid at the exponentials-first default (08cf439): three bench_peers.py
# processes (flashattn / SDPA FA2 / SDPA cuDNN, bf16, forward, head dims 64 / 128 / 256), then
# grid_median.py, then two bench_fp8.py processes (fp8 / bf16 / cuDNN bf16, with the error
# report). The backward's kernels are unchanged since the forty-second session's grid
# (bench/results/h100-peers-20261205-head/). Library: build-full (sm_90a, every head dim) carried
# as build-lead/new/lib.xz. Run from the repository root with $OUT set; returns logs.tgz.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
xz -dc build-lead/new/lib.xz > /tmp/libflashattn.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libflashattn.so FLASHATTN_COMMIT=08cf439
t0=$SECONDS
for r in 0 1 2; do
  [ $((SECONDS - t0)) -lt 300 ] || break
  timeout 120 python3 bench/gpu/bench_peers.py $L/peers-r$r.csv --passes fwd > $L/peers-r$r.log 2>&1; echo "peers run $r rc=$? t=$((SECONDS-t0))"
done
for r in 0 1; do
  [ $((SECONDS - t0)) -lt 420 ] || break
  timeout 80 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
done
python3 bench/gpu/grid_median.py $L/peers-r*.csv > $L/grid-median.md 2>&1; echo "median rc=$?"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
