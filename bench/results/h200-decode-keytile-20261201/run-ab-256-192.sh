#!/usr/bin/env bash
# sm80 one-warp decode tiles at head dims 192/256: key tile 64 (A, spills 1.3-1.8 KB) vs 32 (B32) vs 16 (B16, no spills).
set -uo pipefail
for v in A B16 B32; do xz -dc build-lead/c2/lib$v.so.xz > /tmp/lib$v.so; done
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for r in ${ROUNDS:-1}; do
  for v in A B16 B32; do
    for d in 256 192; do
      FLASHATTN_LIBRARY=/tmp/lib$v.so timeout 100 python3 bench/gpu/bench_decode.py $L/dec-d$d-$v-r$r.csv --head-dim $d --impls flashattn > /dev/null 2>&1
      echo "r$r $v d$d rc=$? t=$((SECONDS-t0))"
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
