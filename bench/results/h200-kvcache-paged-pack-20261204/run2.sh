#!/usr/bin/env bash
# GQA packing in the Hopper forward's per-sequence kernels (pack_log2) and
# the paged caches' batched block-table reads (KeyPages): SASS of the varlen
# head-dim-128 kernels against the session's start, KV-cache / varlen GPU
# tests, sanitizers on packed cases, chunked prefill with the default
# dispatch beside SDPA, the short chunks on each path, paged caches, the rest
# of the GPU binary.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/pack
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for x in orig192 new192 new128; do
  case $x in *192) K=_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16Li128ELi192EEELb1ELi0EEEvNS2_10KernelArgsE;;
             *) K=_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16Li128ELi128EEELb1ELi0EEEvNS2_10KernelArgsE;; esac
  xz -dc $D/$x.o.xz > /tmp/$x.o
  cuobjdump -sass -fun $K /tmp/$x.o > $L/sass-$x.txt 2>&1
  d=$(grep -n 'USETMAXREG.DEALLOC' $L/sass-$x.txt | head -1 | cut -d: -f1)
  echo "sass $x: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $L/sass-$x.txt) instructions, dealloc at line $d, STL/LDL before it $(head -n $d $L/sass-$x.txt | grep -cE 'STL|LDL'), after $(tail -n +$d $L/sass-$x.txt | grep -cE 'STL|LDL')"
done
timeout 150 /tmp/gt --gtest_filter='*KvCache*:*Varlen*' --gtest_brief=1 > $L/gpu-tests-kv.log 2>&1; echo "gpu tests kv/varlen rc=$? $(tail -3 $L/gpu-tests-kv.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-kv.log | head -30
for tool in memcheck racecheck synccheck initcheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='*KvCache*cuda*q16_h8x1_d128*:*KvCache*cuda*q32_h16x4*:*KvCache*cuda*q24_h32x8*:*KvCache*cuda*q100*page16*' --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
B="timeout 90 python3 bench/gpu/bench_kvcache_prefill.py"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/prefill-default.csv --label flashattn > $L/prefill-default.log 2>&1; echo "prefill default rc=$? t=$((SECONDS-t0))"
S="--impls flashattn --chunks 16,32,48,64"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_KVCACHE_MIN_Q=1 $B $L/prefill-sm90pack.csv --label sm90_pack $S > $L/prefill-sm90pack.log 2>&1; echo "prefill sm90 pack rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_KVCACHE_MIN_Q=1 FLASHATTN_SM90_PACK_GQA=0 $B $L/prefill-sm90nopack.csv --label sm90_nopack $S > $L/prefill-sm90nopack.log 2>&1; echo "prefill sm90 nopack rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_DISABLE_SM90=1 $B $L/prefill-sm80.csv --label sm80 $S > $L/prefill-sm80.log 2>&1; echo "prefill sm80 rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/prefill-page16.csv --label page16 --impls flashattn --page-size 16 > $L/prefill-page16.log 2>&1; echo "prefill page16 rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/prefill-page64.csv --label page64 --impls flashattn --page-size 64 --chunks 64,512,2048 > $L/prefill-page64.log 2>&1; echo "prefill page64 rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so timeout 60 python3 bench/gpu/bench_varlen.py $L/varlen.csv > $L/varlen.log 2>&1; echo "varlen rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so timeout 100 python3 -m pytest -q python/tests/test_kvcache_extras.py python/tests/test_varlen.py -x > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
for f in $L/prefill-sm90pack.csv $L/prefill-sm90nopack.csv $L/prefill-sm80.csv $L/prefill-default.csv $L/prefill-page16.csv $L/prefill-page64.csv; do grep -v '^#' $f | cut -d, -f1-4,9,10; done
timeout $((575 - SECONDS + t0)) /tmp/gt --gtest_filter='-*KvCache*:*Varlen*' --gtest_brief=1 > $L/gpu-tests-rest.log 2>&1; echo "gpu tests rest rc=$? $(tail -3 $L/gpu-tests-rest.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-rest.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
