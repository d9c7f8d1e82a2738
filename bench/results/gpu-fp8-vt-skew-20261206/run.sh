#!/usr/bin/env bash
# Forty-sixth session: padded V^T rows one key tile longer than their tiles (fp8_v_transpose.hpp
# FLASHATTN_SM90_FP8_VT_SKEW=1), so that rows are not a power of two apart. B = 7a1f644's library
# (rows of exactly the tiles: 16384 keys apart at 16k), S = this build. fp8 GPU tests and memcheck
# on S; bench_fp8.py --kernels fp8 (and the varlen call on the same tokens, whose V^T rows were
# already skewed by 256 keys per sequence), head dims 128 / 256, 1k-16k, B S S B.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/B /tmp/S
xz -dc build-lead/uw/base-lib.xz > /tmp/B/libflashattn.so.0
xz -dc build-lead/uw/lib.xz > /tmp/S/libflashattn.so.0
xz -dc build-lead/uw/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
/tmp/gt --gtest_filter='*Fp8*' > $L/tests.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -1 $L/tests.log; grep -E '^\[  FAILED' $L/tests.log | head
timeout 150 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='Sweep/Fp8Forward.MatchesReference/*d128*:Sweep/Fp8Forward.MatchesReference/*d192*' > $L/san-memcheck.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; grep -E 'ERROR SUMMARY|PASSED|FAILED' $L/san-memcheck.log | tail -2
i=0
for lib in B S S B; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 120 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128,256 \
    --seqlens 1024,4096,16384 --impls flashattn_fp8,flashattn_fp8_varlen,flashattn_bf16 --error-seqlen 0 --kernels > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
for f in $L/fp8-*.csv; do echo "== $f"; grep -h 'kernels,flashattn_fp8,' $f | sed 's/sm90::fwd_kernel<[^=]*/attn/; s/sm90::=/VT=/; s/# kernels,flashattn_fp8,//'; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
