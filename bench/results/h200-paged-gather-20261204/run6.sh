#!/usr/bin/env bash
# What the consumers' proxy fence after each gathered K/V wait costs: the
# committed library (B) against the same code without the fence (experiment
# only: not a correct program), alternated, 16-row pages.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s29f
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/B_nofence.so.xz > /tmp/B_nofence.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
B="timeout 60 python3 bench/gpu/bench_kvcache_prefill.py --impls flashattn --chunks 16,128,256,2048 --page-size 16"
for r in 1 2; do
  FLASHATTN_LIBRARY=/tmp/B.so $B $L/fence-r$r.csv --label fence > $L/fence-r$r.log 2>&1; echo "fence r$r rc=$? t=$((SECONDS-t0))"
  FLASHATTN_LIBRARY=/tmp/B_nofence.so $B $L/nofence-r$r.csv --label nofence > $L/nofence-r$r.log 2>&1; echo "nofence r$r rc=$? t=$((SECONDS-t0))"
done
for f in $L/*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
