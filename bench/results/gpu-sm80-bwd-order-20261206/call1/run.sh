#!/usr/bin/env bash
# Fiftieth session: the sm80 backward's grid order (kernel_traits.hpp bwd_block), key-tile-major
# (FLASHATTN_SM80_BWD_ORDER=tile, the kernels' order until now) against head-major (=head,
# FlashAttention-2's and the Hopper backward's order), one library (build-full at this change,
# carried as build-lead/s50/{lib,gpu-tests}.xz), the sm80 path forced (FLASHATTN_DISABLE_SM90=1).
# (1) the backward / varlen / determinism GPU tests with the head-major order; (2) memcheck on small
# backward cases with it; (3) bench_peers.py backward, flashattn and SDPA's FA2 in every process,
# head dims 64 / 128 / 256, 1k / 4k / 16k, causal and not, processes alternated T H H T T H.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
xz -dc build-lead/s50/lib.xz > /tmp/lib.so; xz -dc build-lead/s50/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
F='*Backward*:*Determinism*:*VarlenIsolation*'
FLASHATTN_SM80_BWD_ORDER=head timeout 200 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-head.log 2>&1
echo "tests head rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-head.log; grep -E '^\[  FAILED' $L/tests-head.log | head
FLASHATTN_SM80_BWD_ORDER=head timeout 100 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='Small/Backward.*bf16*' --gtest_brief=1 > $L/memcheck-head.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -3 $L/memcheck-head.log
n=0
for o in tile head head tile tile head; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt 500 ] || break
  FLASHATTN_SM80_BWD_ORDER=$o timeout 100 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 64,128,256 --seqlens 1024,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "peers $n $o rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
