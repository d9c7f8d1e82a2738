#!/usr/bin/env bash
# Session 21, device call 5: the full fp32 grid with the final kernels (v5, e351b74) against SDPA.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
export FLASHATTN_LIBRARY=/tmp/libB.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
timeout 240 python3 bench/gpu/bench_fp32.py $O/h200-fp32.csv > $O/bench-fp32.log 2>&1; echo "bench rc=$?"
cd $OUT && tar czf logs.tgz logs
