#!/usr/bin/env bash
# Second call (run.sh's fp8 CSVs did not come back: too many files under $OUT): the same A/B,
# three rounds, results packed in one archive.
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/r2; mkdir -p $R
B=build-lead/pp
[ -f $L/n/libflashattn.so.0 ] || xz -dc $B/new.so.xz > $L/n/libflashattn.so.0
[ -f $L/o/libflashattn.so.0 ] || xz -dc $B/old.so.xz > $L/o/libflashattn.so.0
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for r in 1 2 3; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 90 python3 bench/gpu/bench_fp8.py $R/fp8-$v-r$r.csv --hdims 128 \
      --seqlens 2048,8192,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 0 > $R/fp8-$v-r$r.log 2>&1
    echo "fp8 r$r $v rc=$? t=$((SECONDS-t0))"
  done
done
for f in $R/fp8-*.csv; do echo "== $f"; grep -v '^#' $f | cut -d, -f1-5,8-; done
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
