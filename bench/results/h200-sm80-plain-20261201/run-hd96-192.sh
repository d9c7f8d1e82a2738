#!/usr/bin/env bash
# Head dims 96 and 192 (the sm80 kernels serve them on Hopper by default) against FA2, e453e24's kernels, two processes.
set -uo pipefail
xz -dc build-lead/ab/libA.so.xz > /tmp/libA.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libA.so
t0=$SECONDS
for r in 1 2; do
  timeout 120 python3 bench/gpu/bench_peers.py $L/hd96-192-r$r.csv --hdims 96,192 --impls flashattn,sdpa_flash > /dev/null 2>&1; echo "peers r$r rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
