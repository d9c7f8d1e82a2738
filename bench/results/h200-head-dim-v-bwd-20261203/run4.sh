#!/usr/bin/env bash
# The whole GPU test binary at 921c3ac's kernels (head-dim-192 backward tile,
# v's own head dim in the Hopper backward), default dispatch (sm90a).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/dvbwd/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
timeout 560 /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
