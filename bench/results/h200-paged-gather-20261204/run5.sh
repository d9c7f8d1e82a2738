#!/usr/bin/env bash
# At 8aae77a (paged gather + its rule): every paged KV-cache case through
# TMA boxes (FLASHATTN_SM90_PAGED_GATHER=0), chunked prefill over the whole
# chunk grid on 16- and 32-row pages (default rule: gathered) beside the
# contiguous cache and SDPA's FA2, then the whole GPU test binary.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s29e
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
FLASHATTN_SM90_PAGED_GATHER=0 timeout 60 /tmp/gt --gtest_filter='*KvCache*cuda*page*' --gtest_brief=1 > $L/gpu-tests-tma-all.log 2>&1; echo "tma-all paged tests rc=$? $(tail -3 $L/gpu-tests-tma-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
B="timeout 90 python3 bench/gpu/bench_kvcache_prefill.py"
$B $L/p16.csv --page-size 16 --label flashattn_page16 --impls flashattn,sdpa_flash > $L/p16.log 2>&1; echo "p16 rc=$? t=$((SECONDS-t0))"
$B $L/p32.csv --page-size 32 --label flashattn_page32 --impls flashattn > $L/p32.log 2>&1; echo "p32 rc=$? t=$((SECONDS-t0))"
$B $L/contig.csv --label flashattn_contig --impls flashattn > $L/contig.log 2>&1; echo "contig rc=$? t=$((SECONDS-t0))"
for f in $L/*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
timeout $((590 - SECONDS + t0)) /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
