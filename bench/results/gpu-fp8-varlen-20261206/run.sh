#!/usr/bin/env bash
# Forty-sixth session: fp8 varlen forward on the Hopper kernel (V^T laid out per sequence by the
# transpose; fwd_kernel<fp8, varlen>). L = this library (build-lead/vl). (1) The fp8 GPU tests
# (padded, varlen, C ABI, argument checks) and the 16-bit varlen / isolation tests (the kernel
# files changed); racecheck and memcheck on the fp8 varlen cases; pytest test_fp8.py on CUDA.
# (2) bench_fp8.py --kernels: fp8 padded against the same tokens as a varlen batch, head dims
# 128 / 256, 1k / 4k / 16k, causal or not, two processes.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python:$PWD/python/tests PYTHONUNBUFFERED=1
mkdir -p /tmp/L
xz -dc build-lead/vl/lib.xz > /tmp/L/libflashattn.so.0
xz -dc build-lead/vl/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
/tmp/gt --gtest_filter='*Fp8*:*Varlen*' > $L/tests.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests.log; grep -E '^\[  FAILED' $L/tests.log | head
for tool in racecheck memcheck; do
  timeout 200 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='Sweep/Fp8Varlen.*:Devices/Fp8Invalid.Varlen*' > $L/san-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $L/san-$tool.log | tail -3
done
FLASHATTN_LIBRARY=/tmp/L/libflashattn.so.0 timeout 200 python3 -m pytest -q python/tests/test_fp8.py > $L/pytest-fp8.log 2>&1
echo "pytest rc=$? t=$((SECONDS-t0))"; tail -2 $L/pytest-fp8.log
for i in 0 1; do
  FLASHATTN_LIBRARY=/tmp/L/libflashattn.so.0 timeout 120 python3 bench/gpu/bench_fp8.py $L/fp8-varlen-$i.csv --hdims 128,256 \
    --seqlens 1024,4096,16384 --impls flashattn_fp8,flashattn_fp8_varlen --error-seqlen 0 --kernels > $L/fp8-varlen-$i.log 2>&1
  echo "bench $i rc=$? t=$((SECONDS-t0))"
done
grep -h kernels $L/fp8-varlen-0.csv | sed 's/sm90::fwd_kernel<[^=]*/attn/; s/sm90::=/VT=/' | head -24
cd $OUT && tar czf logs.tgz logs && rm -rf logs
