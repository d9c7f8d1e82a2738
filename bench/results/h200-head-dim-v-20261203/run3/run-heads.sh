#!/usr/bin/env bash
# Is the padded backward's ~0.6 ms the copies or the workspace's pool mapping?
# 16 heads: ~384 MB of padded tensors (above the 256 MiB the pool keeps); 8 heads: ~192 MB.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/hdv/C.so.xz > /tmp/C.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/C.so
for h in 16 8 16 8; do
  python3 bench/gpu/bench_head_dim_v.py $L/h$h-$RANDOM.csv --heads $h --seqlens 1024,16384 --passes bwd > /dev/null 2>&1
done
for f in $L/*.csv; do echo "== $f"; grep flashattn $f; done
nsys --version >/dev/null 2>&1 && echo has-nsys
cd $OUT && tar czf logs.tgz logs && rm -rf logs
