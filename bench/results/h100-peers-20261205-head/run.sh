#!/usr/bin/env bash
# DESIGN.md's grid at HEAD's CUDA code (d612e58; CUDA sources as of 3bdc98f) on whatever Hopper card
# the device machine lends: five bench_peers.py runs, one process each, back to back (flashattn /
# SDPA FA2 / SDPA cuDNN, bf16, fwd and bwd, head dims 64 / 128 / 256), then grid_median.py; two
# bench_fp8.py runs (fp8 / bf16 / cuDNN); all of it comes back as logs.tgz. Library: the sm_90a build of build-full, carried as
# build-lead/full/lib.xz.  Run from the repository root with $OUT set.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt
xz -dc build-lead/full/lib.xz > /tmp/libflashattn.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libflashattn.so FLASHATTN_COMMIT=d612e58
t0=$SECONDS
for r in 0 1 2 3 4; do
  timeout 150 python3 bench/gpu/bench_peers.py $L/peers-r$r.csv > $L/peers-r$r.log 2>&1; echo "peers run $r rc=$? t=$((SECONDS-t0))"
done
for r in 0 1; do
  timeout 150 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
done
python3 bench/gpu/grid_median.py $L/peers-r*.csv > $L/grid-median.md 2>&1; echo "median rc=$?"
cp $L/grid-median.md $L/gpu.txt $OUT/
cd $OUT && tar czf logs.tgz logs && rm -rf logs
