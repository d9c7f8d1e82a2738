#!/usr/bin/env bash
# Forty-sixth session: padded fp8 calls on the per-sequence (varlen) kernel, whose fp8 head-dim-128
# instance read 4-7% faster than the padded kernel on the same tokens packed
# (../gpu-fp8-vt-skew-20261206/). B = 7a1f644's library, V = a head-dim-128 build with
# FLASHATTN_SM90_FP8_PADDED_AS_VARLEN=1 (launch.cuh). bench_fp8.py --kernels, fp8 padded and
# varlen, head dim 128, 1k-16k, causal or not, B V V B.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/B /tmp/V
xz -dc build-lead/uw/base-lib.xz > /tmp/B/libflashattn.so.0
xz -dc build-lead/uw/lib.xz > /tmp/V/libflashattn.so.0
t0=$SECONDS; i=0
for lib in B V V B; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 120 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128 \
    --seqlens 1024,4096,16384 --impls flashattn_fp8,flashattn_fp8_varlen --error-seqlen 0 --kernels > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
for f in $L/fp8-*.csv; do echo "== $f"; grep -h 'kernels,' $f | sed 's/sm90::fwd_kernel<[^=]*/attn/; s/sm90::=/VT=/; s/# kernels,flashattn_//; s/hdim=128,//'; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
