#!/usr/bin/env bash
# Third call: the 16-bit head dim 128 on 192 rows (the serial loop, left off by the default) with
# the fixed redo: N = run2's library (knob 1, build-lead/ab/n1.so.xz), O = the knob at 0
# (build-lead/base/lib.xz); bench_peers forward, flashattn only, head dim 128, 1k-16k, causal and
# not, N O O N N O. (Above 1k the default dispatch runs head dim 128 on 192-row tiles.)
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt; cat $R/gpu.txt
xz -dc build-lead/ab/n1.so.xz > $L/n/libflashattn.so.0
xz -dc build-lead/base/lib.xz > $L/o/libflashattn.so.0
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS; r=0
for v in n o o n n o; do
  r=$((r+1)); [ $((SECONDS - t0)) -lt 150 ] || break
  FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 40 python3 bench/gpu/bench_peers.py $R/bf16-$r-$v.csv --hdims 128 \
    --seqlens 1024,2048,4096,8192,16384 --passes fwd --impls flashattn > $R/bf16-$r-$v.log 2>&1
  echo "round $r $v t=$((SECONDS-t0))"
done
cd $OUT && tar czf t.tgz t && rm -rf t
