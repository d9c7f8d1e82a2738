#!/usr/bin/env bash
# Second call: sequence starts in V^T on 128-key (128-byte) boundaries (fp8_vt_seq_start), run1's
# were 16-byte aligned. The fp8 and varlen GPU tests, memcheck on the fp8 varlen cases, then
# bench_fp8.py --kernels padded against varlen as in run.sh.
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
timeout 200 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='Sweep/Fp8Varlen.*:Devices/Fp8Invalid.Varlen*' > $L/san-memcheck.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; grep -E 'ERROR SUMMARY|PASSED|FAILED' $L/san-memcheck.log | tail -2
for i in 0 1; do
  FLASHATTN_LIBRARY=/tmp/L/libflashattn.so.0 timeout 120 python3 bench/gpu/bench_fp8.py $L/fp8-varlen-$i.csv --hdims 128,256 \
    --seqlens 1024,4096,16384 --impls flashattn_fp8,flashattn_fp8_varlen --error-seqlen 0 --kernels > $L/fp8-varlen-$i.log 2>&1
  echo "bench $i rc=$? t=$((SECONDS-t0))"
done
grep -h kernels $L/fp8-varlen-0.csv | sed 's/sm90::fwd_kernel<[^=]*/attn/; s/sm90::=/VT=/' | head -24
cd $OUT && tar czf logs.tgz logs && rm -rf logs
