#!/usr/bin/env bash
# Deterministic sm90 backward: forward grid with query tiles outer and descending (s2, new default), the
# early staging-tile hand-back (s1), the old order (s0). Determinism tests under each, then the A/B.
set -uo pipefail
mkdir -p build-h200/tests
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
T=build-h200/tests/flashattn_gpu_tests
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
timeout 150 $T --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*' > $L/gpu-bwd-tests.log 2>&1; echo "bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-bwd-tests.log | head -8
FLASHATTN_SM90_DET_ORDER_OLD=1 timeout 60 $T --gtest_brief=1 --gtest_filter='*Determinis*' > $L/gpu-det-old-order.log 2>&1; echo "det old order rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED" $L/gpu-det-old-order.log | head -4
for tool in racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $T --gtest_brief=1 --gtest_filter='*DeterministicBackward*/cuda_bf16:*DeterministicBackward*/cuda_f16' > $L/san-$tool.log 2>&1; echo "$tool rc=$? t=$((SECONDS-t0))"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED" $L/san-$tool.log | head -3
done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
AB_TIMEOUT=100 bash bench/gpu/env_ab.sh $L/ab 2 FLASHATTN_SM90_DET_ORDER_OLD=1,FLASHATTN_SM90_DET_LATE=1 FLASHATTN_SM90_DET_ORDER_OLD=1 - -- --passes bwd --hdims 64,128,256 --seqlens 2048,4096,8192,16384 --impls flashattn,flashattn_det > $L/ab.log 2>&1
echo "ab rc=$? t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
