#!/usr/bin/env bash
# sm80 one-warp decode key tile at head dims 96/128: A = 64 (HEAD; spills 236/116 B), C = 32 (192: 16, 256: 32), D = 16.
set -uo pipefail
for v in A C D; do xz -dc build-lead/c2/lib$v.so.xz > /tmp/lib$v.so; done
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for r in 1 2; do
  for v in A C D; do
    for d in 128 96; do
      [ $r = 2 ] && [ $d = 96 ] && continue
      FLASHATTN_LIBRARY=/tmp/lib$v.so timeout 100 python3 bench/gpu/bench_decode.py $L/dec-d$d-$v-r$r.csv --head-dim $d --impls flashattn > /dev/null 2>&1
      echo "r$r $v d$d rc=$? t=$((SECONDS-t0))"
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
