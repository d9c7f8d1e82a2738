#!/usr/bin/env bash
# Padded self-attention at 256 / 640 rows, head dim 128: the default rule
# against FLASHATTN_SM90_HD128_BLOCKM=192, alternated three times, SDPA FA2
# in each process.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/bm2/B.so.xz > /tmp/B.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
for r in 1 2 3; do
  for m in new old; do
    if [ $m = old ]; then export FLASHATTN_SM90_HD128_BLOCKM=192; else unset FLASHATTN_SM90_HD128_BLOCKM; fi
    timeout 60 python3 bench/gpu/bench_peers.py $L/self-$m-r$r.csv --hdims 128 --seqlens 256,640 --passes fwd --impls flashattn,sdpa_flash > $L/self-$m-r$r.log 2>&1
    echo "== $m r$r"; grep -v '^#' $L/self-$m-r$r.csv | grep -v '^impl' | cut -d, -f1,4,5,8
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
