#!/usr/bin/env bash
# DESIGN.md's grid at fb46aa5 (the head-dim-128 tile chosen by wave count): five bench_peers.py
# runs, one process each, back to back (flashattn / SDPA FA2 / SDPA cuDNN, bf16, fwd and bwd,
# head dims 64 / 128 / 256); then grid_median.py for the README table. The plot, on any machine
# with matplotlib: python3 bench/gpu/plot_peers.py peers-r*.csv bench/results/h200-peers-20261204-waves.png
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/grid31/new.so.xz > /tmp/new.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/new.so FLASHATTN_COMMIT=fb46aa5
t0=$SECONDS
for r in 0 1 2 3 4; do
  [ $((SECONDS - t0)) -gt 450 ] && break
  timeout 120 python3 bench/gpu/bench_peers.py $L/peers-r$r.csv > $L/peers-r$r.log 2>&1; echo "run $r rc=$? t=$((SECONDS-t0))"
done
python3 bench/gpu/grid_median.py $L/peers-r*.csv | tee $L/grid-median.md
cd $OUT && tar czf logs.tgz logs && rm -rf logs
