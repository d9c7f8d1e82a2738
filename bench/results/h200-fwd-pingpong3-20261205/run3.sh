#!/usr/bin/env bash
# Third call: head dim 64 (the 192-row kernel with the intra-warpgroup overlap), N against O,
# every grid length, causal and not, four alternated rounds; packed in one archive.
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/r3; mkdir -p $R
B=build-lead/pp
[ -f $L/n/libflashattn.so.0 ] || xz -dc $B/new.so.xz > $L/n/libflashattn.so.0
[ -f $L/o/libflashattn.so.0 ] || xz -dc $B/old.so.xz > $L/o/libflashattn.so.0
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for r in 1 2 3 4; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 90 python3 bench/gpu/bench_peers.py $R/d64-$v-r$r.csv --hdims 64 \
      --passes fwd --impls flashattn > $R/d64-$v-r$r.log 2>&1
    echo "d64 r$r $v rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
