#!/usr/bin/env bash
# sm80 decode split heuristic: blocks per SM scaled by the key tile (4 * 64 / key tile) vs the old 4, head dims 96/192/256;
# KV-cache GPU tests with the new heuristic first.
set -uo pipefail
mkdir -p build-h200/tests
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libS.so
T=build-h200/tests/flashattn_gpu_tests
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
timeout 60 $T --gtest_brief=1 --gtest_filter='*KvCache*:*Varlen*Forward*' > $L/gpu-tests.log 2>&1; echo "tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-tests.log | head -6
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libS.so
for d in 96 192 256; do
  for s in 4 0; do
    FLASHATTN_SM80_DECODE_PER_SM=$s timeout 60 python3 bench/gpu/bench_decode.py $L/dec-d$d-persm$s.csv --head-dim $d --impls flashattn > /dev/null 2>&1
    echo "d$d per_sm=$s rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
