#!/usr/bin/env bash
# At the review commit (one work-tile loop for the consumer and gather
# warps): sanitizers on gathered cases, the chunked prefill on 16-row pages
# and contiguous (no change expected), the whole GPU test binary.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s29g
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
F='*KvCache*cuda_bf16_q100_h4x1_d128*page16*:*KvCache*cuda_bf16_q65_h4x1_d192*page32*:*KvCache*cuda_f16_q32_h16x4_d128*page16*:*KvCache*cuda_f16_q77_h4x2_d256*page64*'
for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
B="timeout 40 python3 bench/gpu/bench_kvcache_prefill.py --impls flashattn --chunks 16,256,2048"
$B $L/p16.csv --page-size 16 --label page16 > $L/p16.log 2>&1; echo "p16 rc=$? t=$((SECONDS-t0))"
$B $L/contig.csv --label contig > $L/contig.log 2>&1; echo "contig rc=$? t=$((SECONDS-t0))"
for f in $L/*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
timeout $((400 - SECONDS + t0)) /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
