#!/usr/bin/env bash
# Device call 2 (2026-12-03): pingpong on the two-consumer tiles at head dims 192 / 256
# for short causal calls (FLASHATTN_SM90_PINGPONG=1 forces it; the default leaves it off
# above head dim 128). Library of 500a4f0 (GPU code unchanged since), carried xz-compressed.
L=/tmp/l; mkdir -p $L $OUT/logs
xz -dc build-lead/c1/lib.so.xz > $L/lib.so
export FLASHATTN_LIBRARY=$L/lib.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for r in 1 2 3; do
  timeout 100 python3 bench/gpu/bench_peers.py $OUT/logs/default-r$r.csv --hdims 192,256 --seqlens 512,1024,2048,4096 --causal 1 --passes fwd --impls flashattn,sdpa_cudnn | grep -v "^#"
  FLASHATTN_SM90_PINGPONG=1 timeout 100 python3 bench/gpu/bench_peers.py $OUT/logs/pp1-r$r.csv --hdims 192,256 --seqlens 512,1024,2048,4096 --causal 1 --passes fwd --impls flashattn | grep -v "^#"
done
cd $OUT && tar czf logs.tgz logs
