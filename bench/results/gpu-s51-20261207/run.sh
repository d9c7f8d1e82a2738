#!/usr/bin/env bash
# Fifty-first session, one short call on whichever card comes (run from the repository root,
# $OUT set; logs.tgz comes back; LIMIT = seconds of work to start). Carried:
# build-lead/s51/lib-s51.xz and gpu-tests.xz (build-full at HEAD of the session: the sm80 backward's last
# group sized by the mask and its walk switch, the sm80 forward's masked calls in groups; sm90a
# kernels as 8afd029).
#   (1) GPU tests on the sm80 path (FLASHATTN_DISABLE_SM90=1) with the defaults: backward,
#       causal and window (forward and backward);
#   H200 only: bench_fp8.py on the Hopper kernels (issue 9's fp8 / bf16 ratio with the
#       forty-sixth session's change);
#   (2) alternating, causal only, SDPA's FA2 in every process, while time is left:
#       forward head dims 64 / 128 / 256, fG = FLASHATTN_SM80_FWD_ORDER=groups against fH = the
#       default (head order); backward head dims 128 / 256, bA = default against bG =
#       FLASHATTN_SM80_BWD_ORDER=groups (the fiftieth session's grid) and bL =
#       FLASHATTN_SM80_BWD_WALK=last (FlashAttention-2's walk over a block's query tiles).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s51/lib-s51.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
xz -dc build-lead/s51/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
LIMIT=${LIMIT:-330}
t0=$SECONDS
FLASHATTN_DISABLE_SM90=1 timeout 100 /tmp/gt --gtest_filter='*Backward*:*Causal*:*Window*' --gtest_brief=1 > $L/tests-default.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests-default.log; grep -E '^\[  FAILED' $L/tests-default.log | head
case "$name" in *H200*)
  timeout 80 python3 bench/gpu/bench_fp8.py $L/fp8-r0.csv > $L/fp8-r0.log 2>&1
  echo "fp8 rc=$? t=$((SECONDS-t0))"; grep -h ',16384,' $L/fp8-r0.csv | grep -v sdpa ;;
esac
export FLASHATTN_DISABLE_SM90=1
n=0
for o in fG fH bA bG bL fH fG bL bG bA fG fH bA bG bL; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt $LIMIT ] || break
  unset FLASHATTN_SM80_FWD_ORDER FLASHATTN_SM80_BWD_ORDER FLASHATTN_SM80_BWD_WALK
  case $o in fG) export FLASHATTN_SM80_FWD_ORDER=groups ;; bG) export FLASHATTN_SM80_BWD_ORDER=groups ;; bL) export FLASHATTN_SM80_BWD_WALK=last ;; esac
  case $o in
  f*) timeout 40 python3 bench/gpu/bench_peers.py $L/f$n-${o#f}.csv --passes fwd --causal 1 --hdims 64,128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/f$n-${o#f}.log 2>&1 ;;
  b*) timeout 40 python3 bench/gpu/bench_peers.py $L/b$n-${o#b}.csv --passes bwd --causal 1 --hdims 128,256 --seqlens 1024,2048,4096 --impls flashattn,sdpa_flash > $L/b$n-${o#b}.log 2>&1 ;;
  esac
  echo "$o ($n) rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
