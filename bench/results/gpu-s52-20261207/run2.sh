#!/usr/bin/env bash
# Fifty-second session, call 2 (after call 1 = ../gpu-s51-20261207/run.sh on an H100): the same
# library (build-lead/s51/lib-s51.xz, HEAD f9e75d8), sm80 path forced, alternating processes while
# LIMIT seconds last, SDPA's FA2 in every process:
#   fG / fH: forward, causal, head dims 64-256, 1k-16k: FLASHATTN_SM80_FWD_ORDER=groups vs head order;
#   bA / bL: backward, causal and not, head dims 64-256, 1k-8k: the default walk (rotate) vs
#            FLASHATTN_SM80_BWD_WALK=last.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
xz -dc build-lead/s51/lib-s51.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
LIMIT=${LIMIT:-400}
t0=$SECONDS
n=0
for o in fG fH bA bL fH fG bL bA fG fH bA bL fH fG bL bA fG fH bA bL fH fG bL bA; do
  n=$((n+1))
  [ $((SECONDS - t0)) -lt $LIMIT ] || break
  unset FLASHATTN_SM80_FWD_ORDER FLASHATTN_SM80_BWD_WALK
  case $o in fG) export FLASHATTN_SM80_FWD_ORDER=groups ;; bL) export FLASHATTN_SM80_BWD_WALK=last ;; esac
  case $o in
  f*) timeout 60 python3 bench/gpu/bench_peers.py $L/f$n-${o#f}.csv --passes fwd --causal 1 --hdims 64,96,128,192,256 --seqlens 1024,2048,4096,8192,16384 --impls flashattn,sdpa_flash > $L/f$n-${o#f}.log 2>&1 ;;
  b*) timeout 90 python3 bench/gpu/bench_peers.py $L/b$n-${o#b}.csv --passes bwd --causal 0,1 --hdims 64,96,128,192,256 --seqlens 1024,2048,4096,8192 --impls flashattn,sdpa_flash > $L/b$n-${o#b}.log 2>&1 ;;
  esac
  echo "$o ($n) rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
