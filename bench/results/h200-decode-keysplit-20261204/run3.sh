#!/usr/bin/env bash
# The whole GPU test binary at 2bd529a (two-warp decode blocks, split count rounded down).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/s30c/gt.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
timeout 480 /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
