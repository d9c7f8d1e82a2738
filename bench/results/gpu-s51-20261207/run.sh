#!/usr/bin/env bash
# Fifty-first session, one call on whichever card comes (run from the repository root, $OUT set;
# logs.tgz comes back). Carried: build-lead/s51/lib-walk.xz and gpu-tests.xz (build-full at
# e6d51af: the sm80 backward's walk switch, kernel_traits.hpp BwdSteps; sm90a kernels as 8afd029).
#   H200 only: bench_fp8.py (issue 9's fp8 / bf16 ratio at head dims 128 and 256 with the
#       forty-sixth session's change, measured on H100s only so far), before and after (2).
#   Any card: (2) the sm80 backward's walk over a block's query tiles, FLASHATTN_SM80_BWD_WALK=
#       rotate (R, the default: each block starts at its own tile), first (F: up from the first
#       tile in every block) and last (L: down from the last, FlashAttention-2's order);
#       bench_peers.py backward, flashattn and SDPA's FA2 in every process,
#       FLASHATTN_DISABLE_SM90=1, processes R F L L F R;
#   (3) with the time left: the backward / varlen / determinism GPU tests on the sm80 path with
#       the walk down from the last tile.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s51/lib-walk.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
xz -dc build-lead/s51/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
fp8() {
  case "$name" in *H200*)
    timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$1.csv > $L/fp8-r$1.log 2>&1
    echo "fp8 run $1 rc=$? t=$((SECONDS-t0))"; grep -h ',16384,' $L/fp8-r$1.csv | grep -v sdpa ;;
  esac
}
fp8 0
n=0
for o in R F L L F R; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt 420 ] || break
  case $o in R) w=rotate ;; F) w=first ;; L) w=last ;; esac
  FLASHATTN_SM80_BWD_WALK=$w FLASHATTN_DISABLE_SM90=1 timeout 100 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 64,128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "sm80 bwd $n $o rc=$? t=$((SECONDS-t0))"
done
fp8 1
left=$((560 - (SECONDS - t0)))
if [ $left -gt 60 ]; then
  F='*Backward*:*Determinism*:*VarlenIsolation*:*OddHeadDim*:*HeadDimLimits*:*HeadDimV*'
  FLASHATTN_SM80_BWD_WALK=last FLASHATTN_DISABLE_SM90=1 timeout $left /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-last.log 2>&1
  echo "tests last rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests-last.log; grep -E '^\[  FAILED' $L/tests-last.log | head
fi
cd $OUT && tar czf logs.tgz logs && rm -rf logs
