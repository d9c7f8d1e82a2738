#!/usr/bin/env bash
# Fiftieth session, third call: the sm80 backward's grid order at head dims 96 and 192 (the 96 and
# 192 tiles; what an A100-class GPU runs), FLASHATTN_SM80_BWD_ORDER=tile against the default
# (auto), same library as call2 (build-lead/s50/lib.xz), sm80 path forced, processes T A A T.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
xz -dc build-lead/s50/lib.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
n=0
for o in tile auto auto tile; do
  n=$((n+1))
  if [ $o = auto ]; then unset FLASHATTN_SM80_BWD_ORDER; else export FLASHATTN_SM80_BWD_ORDER=$o; fi
  timeout 100 python3 bench/gpu/bench_peers.py $L/p$n-$o.csv --passes bwd --hdims 96,192 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/p$n-$o.log 2>&1
  echo "peers $n $o rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
