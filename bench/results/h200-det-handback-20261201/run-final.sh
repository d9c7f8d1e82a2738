#!/usr/bin/env bash
# Deterministic sm90 backward with the early staging-tile hand-back (the kept change): GPU backward and
# determinism tests, racecheck/synccheck/memcheck, then deterministic / default over the whole grid, two processes.
set -uo pipefail
mkdir -p build-h200/tests
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
T=build-h200/tests/flashattn_gpu_tests
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
timeout 150 $T --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*' > $L/gpu-bwd-tests.log 2>&1; echo "bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-bwd-tests.log | head -8
for tool in racecheck synccheck memcheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $T --gtest_brief=1 --gtest_filter='*DeterministicBackward*/cuda_bf16:*DeterministicBackward*/cuda_f16' > $L/san-$tool.log 2>&1; echo "$tool rc=$? t=$((SECONDS-t0))"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED" $L/san-$tool.log | head -3
done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
for r in 1 2; do
  timeout 150 python3 bench/gpu/bench_peers.py $L/det-r$r.csv --passes bwd --impls flashattn,flashattn_det > /dev/null 2>&1; echo "det grid r$r rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
