#!/usr/bin/env bash
# FP8 (e4m3) forward against our bf16 forward and SDPA cuDNN, same processes (bench_fp8.py),
# two processes, with the kernels of ecfd9ab (bf16 head dim 128 on the tile by the wave count).
set -u
mkdir -p /tmp/w && xz -dc build-lead/fp8/lib.so.xz > /tmp/w/libflashattn.so.0
export PYTHONPATH=$PWD/python FLASHATTN_LIBRARY=/tmp/w/libflashattn.so.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do
  timeout 200 python3 bench/gpu/bench_fp8.py $OUT/fp8-r$r.csv > $OUT/fp8-r$r.log 2>&1
  echo "r$r rc=$?"; tail -n 12 $OUT/fp8-r$r.log
done
