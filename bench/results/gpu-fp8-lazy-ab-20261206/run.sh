#!/usr/bin/env bash
# Forty-fifth session: what the fp8 kernel's lazy rescale buys and costs. L = the default
# library (build-full at 3a490c0: lazy rescale + exponentials first for fp8), E = a build with
# FLASHATTN_SM90_FP8_LAZY=0 (the exact-max step, every row's largest P exact in e4m3).
# (1) Speed: bench_fp8.py, head dims 128 / 256, 4k / 16k, causal or not, fp8 and our bf16,
# L E L E. (2) Accuracy: the CLI's --check (fp64 reference; naive = the worst lagged naive) on
# batch 2 x 113 x 267, 4 / 2 heads, four seeds, every kv head, both libraries.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/L /tmp/E
xz -dc build-lead/new/lib.xz > /tmp/L/libflashattn.so.0; xz -dc build-lead/lazy/nolazy-lib.xz > /tmp/E/libflashattn.so.0
t0=$SECONDS
for d in 128 256; do for lib in L E; do for seed in 1 2 3 4; do
  echo "== $lib d $d seed $seed" >> $L/check.log
  LD_LIBRARY_PATH=/tmp/$lib build-lead/new/cli run --device cuda --dtype e4m3 --batch 2 --heads 4 --heads-kv 2 \
    --seqlen-q 113 --seqlen-k 267 --head-dim $d --check --check-heads 4 --repeat 1 --seed $seed 2>&1 | grep "^check  out" >> $L/check.log
done; done; done
echo "checks t=$((SECONDS-t0))"
i=0
for lib in L E L E; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 80 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128,256 \
    --seqlens 4096,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 4096 > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
