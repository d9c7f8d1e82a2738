#!/usr/bin/env bash
# Decode key tile per head dim (kept build): GPU KV-cache / varlen / CAbi tests, memcheck on the KV-cache sweep,
# then the decode grid at head dims 96/128/192/256 with torch SDPA and the copy rows.
set -uo pipefail
mkdir -p build-h200/tests
xz -dc build-lead/c1/tests__flashattn_gpu_tests.xz > build-h200/tests/flashattn_gpu_tests; chmod +x build-h200/tests/flashattn_gpu_tests
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libK.so
T=build-h200/tests/flashattn_gpu_tests
L=$OUT/logs; mkdir -p $L
t0=$SECONDS
timeout 120 $T --gtest_brief=1 --gtest_filter='*KvCache*:*Varlen*:*CAbi*:*Forward*' > $L/gpu-tests.log 2>&1; echo "tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-tests.log | head -8
timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $T --gtest_brief=1 --gtest_filter='Sweep/KvCache.*' > $L/san-memcheck-kvcache.log 2>&1; echo "memcheck rc=$? t=$((SECONDS-t0))"
grep -E "ERROR SUMMARY|^\[  PASSED|FAILED" $L/san-memcheck-kvcache.log | head -3
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libK.so
for d in 128 256 96 192; do
  timeout 100 python3 bench/gpu/bench_decode.py $L/decode-d$d.csv --head-dim $d > /dev/null 2>&1; echo "decode d$d rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
