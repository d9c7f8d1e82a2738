#!/usr/bin/env bash
# Session 20, device call 1: the full GPU sweep and every Python test with 9c9a4e9 (+ seq_lens leftpad fix).
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export FLASHATTN_LIBRARY=/tmp/libB.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
t0=$SECONDS
timeout 280 /tmp/gpu_tests --gtest_brief=1 > $O/gpu-sweep.log 2>&1; echo "sweep rc=$? t=$((SECONDS-t0))"
grep -E "^\[====|PASSED \]|SKIPPED \]|FAILED" $O/gpu-sweep.log | head -20
grep -B2 -A12 -m3 "Failure" $O/gpu-sweep.log | head -60
timeout 200 python3 -m pytest -q -x python/tests > $O/pytest-all.log 2>&1; echo "pytest rc=$? t=$((SECONDS-t0))"
tail -n 40 $O/pytest-all.log
cd $OUT && tar czf logs.tgz logs
