#!/usr/bin/env bash
# Deterministic sm90 backward with two dQ accumulator copies (chains of waits cut in two):
# GPU tests (default, and copies forced to 1 and 4), sanitizers, then A/B round 1.
set -uo pipefail
mkdir -p build-h200/tests build-h200/src
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
T=build-h200/tests/flashattn_gpu_tests
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
timeout 200 $T --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*' > $L/gpu-bwd-tests.log 2>&1; echo "bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-bwd-tests.log | head -8
for c in 0 2; do
  FLASHATTN_SM90_DET_COPIES_LOG2=$c timeout 60 $T --gtest_brief=1 --gtest_filter='*Determinis*' > $L/gpu-det-copies$c.log 2>&1; echo "det copies_log2=$c rc=$? t=$((SECONDS-t0))"
  grep -E "FAILED|^\[====|PASSED" $L/gpu-det-copies$c.log | head -4
done
for tool in racecheck synccheck memcheck; do
  timeout 80 compute-sanitizer --tool $tool --print-limit 10 $T --gtest_brief=1 --gtest_filter='*DeterministicBackward*/cuda_bf16:*DeterministicBackward*/cuda_f16' > $L/san-$tool.log 2>&1; echo "$tool rc=$? t=$((SECONDS-t0))"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED" $L/san-$tool.log | head -3
done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
AB_TIMEOUT=100 bash bench/gpu/env_ab.sh $L/ab 1 FLASHATTN_SM90_DET_COPIES_LOG2=0 FLASHATTN_SM90_DET_COPIES_LOG2=1 FLASHATTN_SM90_DET_COPIES_LOG2=1,FLASHATTN_SM90_DET_INTERLEAVE_LOG2=0 -- --passes bwd --hdims 128,256 --seqlens 2048,4096,8192,16384 --impls flashattn,flashattn_det > $L/ab.log 2>&1
echo "ab rc=$? t=$((SECONDS-t0))"; cat $L/ab.log | tail -5
cd $OUT && tar czf logs.tgz logs && rm -rf logs
