#!/usr/bin/env bash
# Paged KV caches on the Hopper forward (KeyPages): the whole GPU test binary,
# sanitizers on paged KV-cache cases, then chunked prefill on 16- and
# 256-row pages beside the contiguous cache and the sm80 path.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/paged
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
K=_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16Li128ELi128EEELb1ELi0EEEvNS2_10KernelArgsE
for x in base new; do
  xz -dc $D/$x.o.xz > /tmp/$x.o
  cuobjdump -sass -fun $K /tmp/$x.o > $L/sass-varlen-$x.txt 2>&1
  echo "sass $x: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $L/sass-varlen-$x.txt) instructions, $(grep -c STL $L/sass-varlen-$x.txt) STL, $(grep -c LDL $L/sass-varlen-$x.txt) LDL, $(grep -c HGMMA $L/sass-varlen-$x.txt) HGMMA"
done
timeout 120 /tmp/gt --gtest_filter='*KvCache*' --gtest_brief=1 > $L/gpu-tests-kv.log 2>&1; echo "gpu tests kv rc=$? $(tail -3 $L/gpu-tests-kv.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-kv.log | head -30
for tool in memcheck racecheck synccheck initcheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='*KvCache*cuda*q100*page16*:*KvCache*cuda*q77*page64*:*KvCache*cuda*q200*page128*' --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
B="timeout 90 python3 bench/gpu/bench_kvcache_prefill.py"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/prefill-page16.csv --label flashattn_page16 --page-size 16 > $L/prefill-page16.log 2>&1; echo "prefill page16 rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/prefill-page256.csv --label flashattn_page256 --impls flashattn --page-size 256 > $L/prefill-page256.log 2>&1; echo "prefill page256 rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/prefill-contig.csv --label flashattn_contig --impls flashattn > $L/prefill-contig.log 2>&1; echo "prefill contig rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_DISABLE_SM90=1 $B $L/prefill-page16-sm80.csv --label flashattn_page16_sm80 --impls flashattn --page-size 16 > $L/prefill-page16-sm80.log 2>&1; echo "prefill page16 sm80 rc=$? t=$((SECONDS-t0))"
for f in $L/prefill-*.csv; do grep -v '^#' $f | cut -d, -f1-10; done
timeout $((570 - SECONDS + t0)) /tmp/gt --gtest_filter='-*KvCache*' --gtest_brief=1 > $L/gpu-tests-rest.log 2>&1; echo "gpu tests rest rc=$? $(tail -3 $L/gpu-tests-rest.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-rest.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
