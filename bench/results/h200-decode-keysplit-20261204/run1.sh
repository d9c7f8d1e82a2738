#!/usr/bin/env bash
# sm80 decode blocks of two warps splitting each key tile (fwd_kernel.cuh KEY_SPLIT): the GPU
# tests that reach the decode tiles (KV cache / varlen / edge with the default dispatch; the
# forward-side tests with the sm80 path forced), memcheck + racecheck on decode steps, then
# bench_decode.py alternated: A = library before the change (f0f6f08's CUDA code), B = with it,
# head dim 128 twice, 256 and 96 once.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/s30c/A.so.xz > /tmp/A.so; xz -dc build-lead/s30c/B.so.xz > /tmp/B.so
xz -dc build-lead/s30c/gt.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 120 /tmp/gt --gtest_filter='*KvCache*:*Varlen*:*Edge*' --gtest_brief=1 > $L/gpu-tests-kv.log 2>&1; echo "kv/varlen/edge rc=$? $(tail -2 $L/gpu-tests-kv.log | tr '\n' ' ') t=$((SECONDS-t0))"
FLASHATTN_DISABLE_SM90=1 timeout 150 /tmp/gt --gtest_filter='*Forward*:*KvCache*:*Gqa*:*GQA*' --gtest_brief=1 > $L/gpu-tests-sm80fwd.log 2>&1; echo "sm80-forced fwd rc=$? $(tail -2 $L/gpu-tests-sm80fwd.log | tr '\n' ' ') t=$((SECONDS-t0))"
S="timeout 150 compute-sanitizer --error-exitcode 9"
F='Sweep/KvCache.MatchesReference/cuda_bf16_q1_*:Sweep/KvCache.MatchesReference/cuda_f16_q1_*'
$S --tool memcheck /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/san-memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $L/san-memcheck.log | tr '\n' ' ') t=$((SECONDS-t0))"
$S --tool racecheck /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/san-racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $L/san-racecheck.log | tr '\n' ' ') t=$((SECONDS-t0))"
FLASHATTN_DISABLE_SM90=1 $S --tool racecheck /tmp/gt --gtest_filter='Small/Forward.*cuda_bf16*_q1_*' --gtest_brief=1 > $L/san-racecheck-sm80.log 2>&1; echo "racecheck sm80 small q1 rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $L/san-racecheck-sm80.log | tr '\n' ' ') t=$((SECONDS-t0))"
for run in "128 1" "128 2" "256 1" "96 1"; do
  set -- $run
  for v in A B; do
    FLASHATTN_LIBRARY=/tmp/$v.so FLASHATTN_COMMIT=$v timeout 100 python3 bench/gpu/bench_decode.py $L/dec-d$1-$v-r$2.csv --head-dim $1 --impls flashattn$([ $2 = 1 ] && [ $v = A ] && [ $1 = 128 ] && echo ,torch_sdpa,copy_same_bytes) > $L/dec-d$1-$v-r$2.log 2>&1
    echo "dec d$1 $v r$2 rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/dec-*.csv; do echo "== $(basename $f) $(grep '^flashattn' $f | cut -d, -f2,3,16 | tr '\n' ' ')"; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
