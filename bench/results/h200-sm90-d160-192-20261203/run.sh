#!/usr/bin/env bash
# Device call 3 (2026-12-03): head dims 160 / 176 / 192 (forward on the 192 tile, backward on
# the 256 tile) against cuDNN, forward and backward. Library of 500a4f0 (GPU code unchanged
# since), carried xz-compressed.
L=/tmp/l; mkdir -p $L $OUT/logs
xz -dc build-lead/c1/lib.so.xz > $L/lib.so
export FLASHATTN_LIBRARY=$L/lib.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for r in 1 2; do
  timeout 250 python3 bench/gpu/bench_peers.py $OUT/logs/d160-192-r$r.csv --hdims 160,176,192 --seqlens 1024,4096,16384 --passes fwd,bwd --impls flashattn,sdpa_cudnn | grep -v "^#"
done
cd $OUT && tar czf logs.tgz logs
