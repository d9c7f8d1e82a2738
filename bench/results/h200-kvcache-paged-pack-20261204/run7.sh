#!/usr/bin/env bash
# GQA packing for groups that do not divide 128 rows (3, 5, 6, 7, 12): the
# KV-cache / varlen GPU tests, memcheck and racecheck on two such cases, and
# chunked prefill with 28 / 4 heads (a group of 7) packed and unpacked.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/np2
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
timeout 60 /tmp/gt --gtest_filter='*KvCache*cuda*:*Varlen*cuda*' --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='*KvCache*cuda*q16_h28x4*:*KvCache*cuda*q40_h12x4*' --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
B="timeout 40 python3 bench/gpu/bench_kvcache_prefill.py --heads 28,4 --chunks 16,32,64"
$B $L/g7-pack.csv --label g7_pack --impls flashattn,sdpa_flash > $L/g7-pack.log 2>&1; echo "g7 pack rc=$? t=$((SECONDS-t0))"
FLASHATTN_SM90_PACK_GQA=0 $B $L/g7-nopack.csv --label g7_nopack --impls flashattn > $L/g7-nopack.log 2>&1; echo "g7 nopack rc=$? t=$((SECONDS-t0))"
for f in $L/g7-*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
