#!/usr/bin/env bash
# Fiftieth session, second call: the sm80 backward's grid in groups of (batch, kv head) units
# (kernel_traits.hpp bwd_block / bwd_group_units): FLASHATTN_SM80_BWD_ORDER=tile (all units in one
# group: the order until now), head (groups of one: FlashAttention-2's order) and auto (unset: as
# many units as fit half the L2), one library (build-full at this change, carried as
# build-lead/s50/{lib,gpu-tests}.xz), the sm80 path forced (FLASHATTN_DISABLE_SM90=1).
# (1) the backward / varlen / determinism / head-dim GPU tests with the default (auto) order (and
# can_implement taking the padded shape from head_dim_pad::padded_shape); (2) memcheck
# on small backward cases; (3) bench_peers.py backward, flashattn and SDPA's FA2 in every process,
# head dims 64 / 128 / 256, 1k / 2k / 4k / 16k, causal and not, processes T H A A H T T H A.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
xz -dc build-lead/s50/lib.xz > /tmp/lib.so; xz -dc build-lead/s50/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
F='*Backward*:*Determinism*:*VarlenIsolation*:*OddHeadDim*:*HeadDimLimits*:*HeadDimV*'
timeout 200 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-auto.log 2>&1
echo "tests auto rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-auto.log; grep -E '^\[  FAILED' $L/tests-auto.log | head
timeout 100 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='Small/Backward.*bf16*:Sweep/VarlenBackward.*' --gtest_brief=1 > $L/memcheck-auto.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -3 $L/memcheck-auto.log
n=0
for o in tile head auto auto head tile tile head auto; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt 520 ] || break
  if [ $o = auto ]; then unset FLASHATTN_SM80_BWD_ORDER; else export FLASHATTN_SM80_BWD_ORDER=$o; fi
  timeout 100 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 64,128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "peers $n $o rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
