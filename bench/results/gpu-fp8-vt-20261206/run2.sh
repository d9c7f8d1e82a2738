#!/usr/bin/env bash
# Second call: the transpose with a group of 8 lanes writing one V^T row's 128 bytes (key chunks
# along the lanes, shared chunks XOR-swizzled by key / 16). B = before, N = this library.
# Tests, racecheck / memcheck, then bench_fp8 --kernels at head dims 128 / 256, B N B N.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/B /tmp/N
xz -dc build-lead/new/lib.xz > /tmp/B/libflashattn.so.0
xz -dc build-lead/vt/lib.xz > /tmp/N/libflashattn.so.0
xz -dc build-lead/vt/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
/tmp/gt --gtest_filter='Sweep/Fp8Forward.*:Devices/Fp8Invalid.*' > $L/tests-fp8.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -1 $L/tests-fp8.log
SMALL='Sweep/Fp8Forward.MatchesReference/*d128*:Sweep/Fp8Forward.MatchesReference/*d96*:Sweep/Fp8Forward.MatchesReference/*d192*'
for tool in racecheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$SMALL" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $L/san-$tool.log | tail -3
done
i=0
for lib in B N B N; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128,256 \
    --seqlens 512,2048,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 0 --kernels > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; grep -h kernels $L/fp8-$i-$lib.csv | head -2
  i=$((i+1))
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
