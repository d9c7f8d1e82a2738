#!/usr/bin/env bash
# sm80 one-warp decode tiles with K_n and V_n requested together (fwd_kernel.cuh kKVTogether):
# the KV-cache / varlen / edge GPU tests (default dispatch: decode steps run on the sm80 path),
# the forward-side tests with the sm80 path forced, memcheck + racecheck on decode steps,
# then bench_decode.py alternated: A = library before the change, B = with it.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s30a
xz -dc $D/A.so.xz > /tmp/A.so; xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/gt.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 120 /tmp/gt --gtest_filter='*KvCache*:*Varlen*:*Edge*' --gtest_brief=1 > $L/gpu-tests-kv.log 2>&1; echo "kv/varlen/edge rc=$? $(tail -2 $L/gpu-tests-kv.log | tr '\n' ' ') t=$((SECONDS-t0))"
FLASHATTN_DISABLE_SM90=1 timeout 150 /tmp/gt --gtest_filter='*Forward*:*KvCache*:*Gqa*:*GQA*' --gtest_brief=1 > $L/gpu-tests-sm80fwd.log 2>&1; echo "sm80-forced fwd rc=$? $(tail -2 $L/gpu-tests-sm80fwd.log | tr '\n' ' ') t=$((SECONDS-t0))"
S="timeout 120 compute-sanitizer --error-exitcode 9"
F='Sweep/KvCache.MatchesReference/cuda_bf16_q1_*'
$S --tool memcheck /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/san-memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $L/san-memcheck.log | tr '\n' ' ') t=$((SECONDS-t0))"
$S --tool racecheck /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/san-racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $L/san-racecheck.log | tr '\n' ' ') t=$((SECONDS-t0))"
for r in 1 2; do
  for v in A B; do
    FLASHATTN_LIBRARY=/tmp/$v.so FLASHATTN_COMMIT=$v timeout 100 python3 bench/gpu/bench_decode.py $L/dec-$v-r$r.csv --impls flashattn$([ $r = 1 ] && [ $v = A ] && echo ,torch_sdpa,copy_same_bytes) > $L/dec-$v-r$r.log 2>&1
    echo "dec $v r$r rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/dec-*.csv; do echo "== $f"; grep '^flashattn' $f | cut -d, -f2,3,15,16; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
