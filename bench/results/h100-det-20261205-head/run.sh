#!/usr/bin/env bash
# Deterministic / default backward over DESIGN.md's grid at HEAD's kernels (d612e58 CUDA sources,
# the sm_90a build of build-full carried as build-lead/full/lib.xz), three processes, both modes in
# each (bench_peers.py --passes bwd --impls flashattn,flashattn_det). Run from the repository root.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv > $L/gpu.txt
xz -dc build-lead/full/lib.xz > /tmp/libflashattn.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libflashattn.so FLASHATTN_COMMIT=d612e58
t0=$SECONDS
for r in 1 2 3; do
  timeout 150 python3 bench/gpu/bench_peers.py $L/det-r$r.csv --passes bwd --impls flashattn,flashattn_det > $L/det-r$r.log 2>&1; echo "r$r rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
