#!/usr/bin/env bash
# Deterministic sm90 backward without a right mask bound: 8 interleaved kv heads while their Q/dO
# fit 8 MB (this build's rule, setting "-") against the previous rule's 4 (LOG2=2), short lengths,
# alternated rounds, deterministic and default in each process.
set -uo pipefail
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
t0=$SECONDS
mkdir -p build-h200/tests
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
T=build-h200/tests/flashattn_gpu_tests
timeout 120 $T --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*' > $L/gpu-bwd-tests.log 2>&1; echo "bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-bwd-tests.log | head -8
for tool in racecheck synccheck memcheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $T --gtest_brief=1 --gtest_filter='*DeterministicBackwardEight*/cuda_*' > $L/san-$tool.log 2>&1; echo "$tool rc=$? t=$((SECONDS-t0))"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|FAILED" $L/san-$tool.log | head -3
done
AB_TIMEOUT=100 bash bench/gpu/env_ab.sh $L/interleave8 ${ROUNDS:-6} - FLASHATTN_SM90_DET_INTERLEAVE_LOG2=2 -- --passes bwd --causal 0 --seqlens 512,1024,2048,4096 --impls flashattn,flashattn_det > $L/interleave8.log 2>&1
echo "interleave8 rc=$? t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
