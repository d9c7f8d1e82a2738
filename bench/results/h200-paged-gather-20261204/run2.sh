#!/usr/bin/env bash
# Paged K/V gathered by cp.async (paged_gather.cuh): KV-cache / varlen GPU
# tests with the rule (gather for boxes of <= 32 rows) and with every paged
# call gathered, sanitizers on gathered cases, then chunked prefill on pages
# of 16 / 32 / 64 rows gathered and by TMA boxes, and contiguous.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s29b
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
timeout 90 /tmp/gt --gtest_filter='*KvCache*cuda*:*Varlen*cuda*' --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
FLASHATTN_SM90_PAGED_GATHER=1 timeout 60 /tmp/gt --gtest_filter='*KvCache*cuda*page*' --gtest_brief=1 > $L/gpu-tests-gather-all.log 2>&1; echo "gather-all tests rc=$? $(tail -3 $L/gpu-tests-gather-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-gather-all.log | head -20
F='*KvCache*cuda_bf16_q100_h4x1_d128*page16*:*KvCache*cuda_bf16_q65_h4x1_d192*page32*:*KvCache*cuda_f16_q96_h2x2_d96*page16*:*KvCache*cuda_f16_q32_h16x4_d128*page16*'
for tool in memcheck racecheck synccheck; do
  timeout 45 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
B="timeout 70 python3 bench/gpu/bench_kvcache_prefill.py --impls flashattn --chunks 16,64,512,2048"
$B $L/contig.csv --label contig > $L/contig.log 2>&1; echo "contig rc=$? t=$((SECONDS-t0))"
for P in 16 32 64; do
  for G in 1 0; do
    FLASHATTN_SM90_PAGED_GATHER=$G $B --page-size $P $L/p$P-g$G.csv --label p${P}_g$G > $L/p$P-g$G.log 2>&1; echo "page $P gather $G rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
