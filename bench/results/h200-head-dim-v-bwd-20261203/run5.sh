#!/usr/bin/env bash
# Head dim 192's deterministic backward against its default (921c3ac's
# kernels), two processes.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/dvbwd/B.so.xz > /tmp/B.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for r in 1 2; do
  FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_COMMIT=921c3ac timeout 200 python3 bench/gpu/bench_peers.py $L/det192-r$r.csv --hdims 192 --passes bwd --impls flashattn,flashattn_det > $L/det192-r$r.log 2>&1; echo "det r$r rc=$? t=$((SECONDS-t0))"
done
cat $L/det192-r1.csv
cd $OUT && tar czf logs.tgz logs && rm -rf logs
