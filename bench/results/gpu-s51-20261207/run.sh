#!/usr/bin/env bash
# Fifty-first session, one call on whichever card comes (run from the repository root, $OUT set;
# logs.tgz comes back). Carried: build-lead/s51/lib-s51.xz and gpu-tests.xz (build-full at c31b80c:
# the sm80 backward's walk switch and last group sized by the mask, the sm80 forward's masked
# calls in groups; sm90a kernels as 8afd029).
#   (1) GPU tests on the sm80 path (FLASHATTN_DISABLE_SM90=1) with the defaults: backward /
#       varlen / determinism / head-dim, and the causal / window forward;
#   (2) sm80 forward, causal: A = default (groups) against H = FLASHATTN_SM80_FWD_ORDER=head
#       (the order before), bench_peers.py with SDPA's FA2 in every process, A H H A;
#   (3) sm80 backward, head dims 128 / 256: A = defaults; G = FLASHATTN_SM80_BWD_ORDER=groups
#       (the fiftieth session's grid); L = FLASHATTN_SM80_BWD_WALK=last (FA2's walk); A G L L G A
#       while time is left;
#   H200 only, after (1): bench_fp8.py on the Hopper kernels (issue 9's fp8 / bf16 ratio with the
#       forty-sixth session's change).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
xz -dc build-lead/s51/lib-s51.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
xz -dc build-lead/s51/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
LIMIT=${LIMIT:-480}
t0=$SECONDS
F='*Backward*:*Determinism*:*VarlenIsolation*:*OddHeadDim*:*HeadDimLimits*:*HeadDimV*:*Causal*:*Window*'
timeout 150 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-default.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests-default.log; grep -E '^\[  FAILED' $L/tests-default.log | head
case "$name" in *H200*)
  env -u FLASHATTN_DISABLE_SM90 timeout 80 python3 bench/gpu/bench_fp8.py $L/fp8-r0.csv > $L/fp8-r0.log 2>&1
  echo "fp8 rc=$? t=$((SECONDS-t0))"; grep -h ',16384,' $L/fp8-r0.csv | grep -v sdpa ;;
esac
n=0
for o in A H H A; do
  n=$((n+1))
  if [ $o = H ]; then export FLASHATTN_SM80_FWD_ORDER=head; else unset FLASHATTN_SM80_FWD_ORDER; fi
  timeout 40 python3 bench/gpu/bench_peers.py $L/f$n-$o.csv --passes fwd --causal 1 --hdims 64,128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/f$n-$o.log 2>&1
  echo "sm80 fwd $n $o rc=$? t=$((SECONDS-t0))"
done
unset FLASHATTN_SM80_FWD_ORDER
n=0
for o in A G L L G A; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt $((LIMIT - 40)) ] || break
  unset FLASHATTN_SM80_BWD_ORDER FLASHATTN_SM80_BWD_WALK
  case $o in G) export FLASHATTN_SM80_BWD_ORDER=groups ;; L) export FLASHATTN_SM80_BWD_WALK=last ;; esac
  timeout 50 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "sm80 bwd $n $o rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
