#!/usr/bin/env bash
# Fifty-first session, one call on whichever card comes (run from the repository root, $OUT set;
# logs.tgz comes back). Libraries carried: build-lead/s51/lib-head.xz (build-full at 8afd029) and
# lib-rot0.xz (the same with FA_SM80_BWD_ROTATE=0: every backward block walks its head's query
# tiles from the first, as FlashAttention-2's do, instead of starting at its own tile).
#   H200 only: (1) two bench_fp8.py processes with lib-head (issue 9's fp8 / bf16 ratio at head
#       dims 128 and 256 with the forty-sixth session's change, measured on H100s only so far).
#   Any card: (2) the sm80 backward, rotated start (R) against FA2's order (Z), bench_peers.py
#       backward, flashattn and SDPA's FA2 in every process, FLASHATTN_DISABLE_SM90=1, processes
#       R Z Z R (R Z more while time is left).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s51/lib-head.xz > /tmp/lib-R.so; xz -dc build-lead/s51/lib-rot0.xz > /tmp/lib-Z.so
t0=$SECONDS
case "$name" in
*H200*)
  for r in 0 1; do
    FLASHATTN_LIBRARY=/tmp/lib-R.so timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1
    echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
  done
  grep -h ',16384,' $L/fp8-r*.csv | grep -v sdpa ;;
esac
n=0
for o in R Z Z R R Z; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt 480 ] || break
  FLASHATTN_LIBRARY=/tmp/lib-$o.so FLASHATTN_DISABLE_SM90=1 timeout 100 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 64,128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "sm80 bwd $n $o rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
