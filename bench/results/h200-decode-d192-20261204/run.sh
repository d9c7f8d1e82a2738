#!/usr/bin/env bash
# Head dim 192 decode on two-warp blocks of 32 keys (C) against the committed one-warp 16-key
# blocks at 16 per SM (B, 546e6f9): the KV-cache GPU tests with C, then bench_decode.py
# --head-dim 192 alternated B, C, B, C.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
for v in B C; do xz -dc build-lead/s30d/$v.so.xz > /tmp/$v.so; done
xz -dc build-lead/s30d/gt.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 90 /tmp/gt --gtest_filter='*KvCache*' --gtest_brief=1 > $L/gpu-tests-kv.log 2>&1; echo "kv rc=$? $(tail -2 $L/gpu-tests-kv.log | tr '\n' ' ') t=$((SECONDS-t0))"
for r in 1 2; do
  for v in B C; do
    FLASHATTN_LIBRARY=/tmp/$v.so FLASHATTN_COMMIT=$v timeout 60 python3 bench/gpu/bench_decode.py $L/dec-d192-$v-r$r.csv --head-dim 192 --impls flashattn > $L/dec-d192-$v-r$r.log 2>&1
    echo "dec $v r$r rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/dec-*.csv; do echo "== $(basename $f) $(grep '^flashattn' $f | cut -d, -f2,3,16 | tr '\n' ' ')"; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
