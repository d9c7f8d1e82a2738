#!/usr/bin/env bash
# Deterministic sm90 backward, two dQ writer warps at every head dim: GPU backward and determinism
# tests (two writers, then one), racecheck/synccheck/memcheck, (the A/B: run-ab.sh).
set -uo pipefail
mkdir -p build-h200/tests
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
T=build-h200/tests/flashattn_gpu_tests
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
timeout 150 $T --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*' > $L/gpu-bwd-tests.log 2>&1; echo "bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-bwd-tests.log | head -8
FLASHATTN_SM90_DET_TWO_WRITERS=0 timeout 60 $T --gtest_brief=1 --gtest_filter='*Determinis*' > $L/gpu-det-one-writer.log 2>&1; echo "one-writer det tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED" $L/gpu-det-one-writer.log | head -4
for tool in racecheck synccheck memcheck; do
  timeout 70 compute-sanitizer --tool $tool --print-limit 10 $T --gtest_brief=1 --gtest_filter='*DeterministicBackward*/cuda_bf16:*DeterministicBackward*/cuda_f16' > $L/san-$tool.log 2>&1; echo "$tool rc=$? t=$((SECONDS-t0))"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED" $L/san-$tool.log | head -3
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
