#!/usr/bin/env bash
# The two-warp decode blocks with the split count rounded down (fwd_plan.hpp: at most 4 blocks
# per SM): the Python KV-cache and varlen tests on CUDA with that library, then bench_decode.py
# alternated, A = before the change (f0f6f08's CUDA code), B = with it; head dim 128 twice,
# 256 and 96 once.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/s30c/A.so.xz > /tmp/A.so; xz -dc build-lead/s30c/B.so.xz > /tmp/B.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
FLASHATTN_LIBRARY=/tmp/B.so timeout 120 python3 -m pytest -q python/tests/test_kvcache_extras.py python/tests/test_varlen.py > $L/pytest-kv.log 2>&1; echo "pytest kv rc=$? $(tail -1 $L/pytest-kv.log) t=$((SECONDS-t0))"
for run in "128 1" "128 2" "256 1" "96 1"; do
  set -- $run
  for v in A B; do
    FLASHATTN_LIBRARY=/tmp/$v.so FLASHATTN_COMMIT=$v timeout 100 python3 bench/gpu/bench_decode.py $L/dec-d$1-$v-r$2.csv --head-dim $1 --impls flashattn$([ $2 = 1 ] && [ $v = A ] && [ $1 = 128 ] && echo ,torch_sdpa,copy_same_bytes) > $L/dec-d$1-$v-r$2.log 2>&1
    echo "dec d$1 $v r$2 rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/dec-*.csv; do echo "== $(basename $f) $(grep '^flashattn' $f | cut -d, -f2,3,16 | tr '\n' ' ')"; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
