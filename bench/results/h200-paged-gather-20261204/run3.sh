#!/usr/bin/env bash
# Paged gather, second version (whole 16-row boxes per warp, rows past the
# sequence zero-filled by the copy): tests, sanitizers, the SASS of the
# gather loop (spills?), chunked prefill on 16/32/64-row pages.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s29c
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
timeout 90 /tmp/gt --gtest_filter='*KvCache*cuda*:*Varlen*cuda*' --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
FLASHATTN_SM90_PAGED_GATHER=1 timeout 60 /tmp/gt --gtest_filter='*KvCache*cuda*page*' --gtest_brief=1 > $L/gpu-tests-gather-all.log 2>&1; echo "gather-all tests rc=$? $(tail -3 $L/gpu-tests-gather-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-gather-all.log | head -20
F='*KvCache*cuda_bf16_q100_h4x1_d128*page16*:*KvCache*cuda_bf16_q65_h4x1_d192*page32*:*KvCache*cuda_f16_q96_h2x2_d96*page16*:*KvCache*cuda_f16_q32_h16x4_d128*page16*:*KvCache*cuda_f16_q77_h4x2_d256*page64*'
for tool in memcheck racecheck synccheck initcheck; do
  timeout 45 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
K=_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16Li128ELi128EEELb1ELi0EEEvNS2_10KernelArgsE
cuobjdump -sass -fun $K /tmp/B.so > $L/sass-m128-varlen.txt 2>&1; echo "sass lines $(wc -l < $L/sass-m128-varlen.txt) LDGSTS $(grep -c LDGSTS $L/sass-m128-varlen.txt) LDL $(grep -c LDL $L/sass-m128-varlen.txt) STL $(grep -c STL $L/sass-m128-varlen.txt)"
B="timeout 70 python3 bench/gpu/bench_kvcache_prefill.py --impls flashattn --chunks 16,64,512,2048"
$B $L/contig.csv --label contig > $L/contig.log 2>&1; echo "contig rc=$? t=$((SECONDS-t0))"
for PG in 16:1 16:0 32:1 64:1; do
  P=${PG%:*}; G=${PG#*:}
  FLASHATTN_SM90_PAGED_GATHER=$G $B --page-size $P $L/p$P-g$G.csv --label p${P}_g$G > $L/p$P-g$G.log 2>&1; echo "page $P gather $G rc=$? t=$((SECONDS-t0))"
done
for f in $L/*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
