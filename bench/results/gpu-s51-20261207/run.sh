#!/usr/bin/env bash
# Fifty-first session, one call on whichever card comes (run from the repository root, $OUT set;
# logs.tgz comes back). Carried: build-lead/s51/lib-tail.xz and gpu-tests.xz (build-full with the
# sm80 backward's walk switch, kernel_traits.hpp BwdSteps, and the last group sized by the mask,
# bwd_full_groups; sm90a kernels as 8afd029).
#   (1) the backward / varlen / determinism / head-dim GPU tests on the sm80 path
#       (FLASHATTN_DISABLE_SM90=1) with the defaults (order auto, walk rotate);
#   H200 only: (2) bench_fp8.py (issue 9's fp8 / bf16 ratio at head dims 128 and 256 with the
#       forty-sixth session's change, measured on H100s only so far), twice when time allows;
#   (3) bench_peers.py backward, flashattn and SDPA's FA2 in every process, sm80 path, head dims
#       128 and 256: A = the defaults; G = FLASHATTN_SM80_BWD_ORDER=groups (the fiftieth
#       session's grid: the remainder as the last group); L = FLASHATTN_SM80_BWD_WALK=last (down
#       from each head's last query tile, FlashAttention-2's walk); F = walk first;
#       processes A G L F F L G A while time is left.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s51/lib-tail.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
xz -dc build-lead/s51/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
F='*Backward*:*Determinism*:*VarlenIsolation*:*OddHeadDim*:*HeadDimLimits*:*HeadDimV*'
FLASHATTN_DISABLE_SM90=1 timeout 150 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-default.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests-default.log; grep -E '^\[  FAILED' $L/tests-default.log | head
fp8() {
  case "$name" in *H200*)
    timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$1.csv > $L/fp8-r$1.log 2>&1
    echo "fp8 run $1 rc=$? t=$((SECONDS-t0))"; grep -h ',16384,' $L/fp8-r$1.csv | grep -v sdpa ;;
  esac
}
fp8 0
n=0
for o in A G L F F L G A; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt 500 ] || break
  unset FLASHATTN_SM80_BWD_ORDER FLASHATTN_SM80_BWD_WALK
  case $o in G) export FLASHATTN_SM80_BWD_ORDER=groups ;; L) export FLASHATTN_SM80_BWD_WALK=last ;; F) export FLASHATTN_SM80_BWD_WALK=first ;; esac
  FLASHATTN_DISABLE_SM90=1 timeout 60 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "sm80 bwd $n $o rc=$? t=$((SECONDS-t0))"
done
unset FLASHATTN_SM80_BWD_ORDER FLASHATTN_SM80_BWD_WALK
[ $((SECONDS - t0)) -lt 480 ] && fp8 1
cd $OUT && tar czf logs.tgz logs && rm -rf logs
