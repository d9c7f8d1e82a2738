#!/usr/bin/env bash
# Forty-sixth session: the padded fp8 kernel with the warp-uniform warpgroup index (ptx.cuh
# warpgroup_index_uniform, which the varlen kernels take): B = HEAD's library (7a1f644), U = a
# head-dim-128 build with FLASHATTN_SM90_FP8_UNIFORM_WG=1 (run1; that knob was removed after) or
# with FLASHATTN_SM90_FP8_PADDED_AS_VARLEN=1 (run2: padded calls on the per-sequence kernel).
# bench_fp8.py --kernels, fp8 only, head dim 128, 1k-16k, causal or not, B U U B.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/B /tmp/U
xz -dc build-lead/uw/base-lib.xz > /tmp/B/libflashattn.so.0
xz -dc build-lead/uw/lib.xz > /tmp/U/libflashattn.so.0
t0=$SECONDS; i=0
for lib in B U U B; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 120 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128 \
    --seqlens 1024,2048,4096,8192,16384 --impls flashattn_fp8 --error-seqlen 0 --kernels > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
for f in $L/fp8-*.csv; do echo "== $f"; grep -h kernels $f | sed 's/sm90::fwd_kernel<[^=]*/attn/; s/sm90::=/VT=/; s/# kernels,flashattn_fp8,//'; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
