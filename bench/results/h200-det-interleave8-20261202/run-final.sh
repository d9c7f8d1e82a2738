#!/usr/bin/env bash
# Final: deterministic / default over the whole backward grid with this commit's library
# (two dQ writers; 8 interleaved kv heads without a mask bound at short lengths), three processes.
set -uo pipefail
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
t0=$SECONDS
for r in 1 2 3; do
  timeout 120 python3 bench/gpu/bench_peers.py $L/det-final-r$r.csv --passes bwd --impls flashattn,flashattn_det > /dev/null 2>&1; echo "r$r rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
