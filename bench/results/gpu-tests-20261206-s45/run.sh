#!/usr/bin/env bash
# Forty-fifth session, the session's final code: the whole GPU test binary (default dispatch;
# build-full: sm_90a, every head dim), carried as build-lead/new/tests.xz. Run from the
# repository root with $OUT set.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
t0=$SECONDS
xz -dc build-lead/new/tests.xz > /tmp/t && chmod +x /tmp/t
timeout ${SWEEP_T:-420} /tmp/t --gtest_brief=1 > $L/gpu-sweep.log 2>&1; echo "sweep rc=$? t=$((SECONDS-t0))"
grep -E "^\[  FAILED|^\[  PASSED|SKIPPED \]|tests ran" $L/gpu-sweep.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
