#!/usr/bin/env bash
# Forty-sixth session, the kept fp8 changes together: N = this commit's build (transpose at the
# copy rate, varlen, head dim 128's padded calls on the per-sequence kernel), B = 7a1f644's library,
# M = N's code built for head dim 128 with FLASHATTN_SM90_FP8_BLOCKM_HD128=128 (128-row tiles; clean
# flags, unlike the first 128-row build). (1) N: every fp8 / varlen / KV-cache / forward-sweep GPU
# test, racecheck + synccheck on small fp8 cases; pytest test_fp8.py. (2) bench_fp8.py --kernels,
# fp8 and our bf16, head dim 128, 512-16k, B N M B N M.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python:$PWD/python/tests PYTHONUNBUFFERED=1
mkdir -p /tmp/B /tmp/N /tmp/M
xz -dc build-lead/fin/base-lib.xz > /tmp/B/libflashattn.so.0
xz -dc build-lead/fin/lib.xz > /tmp/N/libflashattn.so.0
xz -dc build-lead/fin/m128-lib.xz > /tmp/M/libflashattn.so.0
xz -dc build-lead/fin/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
/tmp/gt --gtest_filter='*Fp8*:*Varlen*:*KvCache*:*Forward*' > $L/tests.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests.log; grep -E '^\[  FAILED' $L/tests.log | head
SMALL='Sweep/Fp8Forward.MatchesReference/*d128*:Sweep/Fp8Varlen.*d128*'
for tool in racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$SMALL" > $L/san-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $L/san-$tool.log | tail -2
done
FLASHATTN_LIBRARY=/tmp/N/libflashattn.so.0 timeout 200 python3 -m pytest -q python/tests/test_fp8.py > $L/pytest-fp8.log 2>&1
echo "pytest rc=$? t=$((SECONDS-t0))"; tail -1 $L/pytest-fp8.log
i=0
for lib in B N M B N M; do
  FLASHATTN_LIBRARY=/tmp/$lib/libflashattn.so.0 timeout 100 python3 bench/gpu/bench_fp8.py $L/fp8-$i-$lib.csv --hdims 128 \
    --seqlens 512,1024,2048,4096,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 0 --kernels > $L/fp8-$i-$lib.log 2>&1
  echo "fp8 $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
for f in $L/fp8-*.csv; do echo "== $f"; grep -h 'kernels,' $f | sed 's/sm90::fwd_kernel<[^=]*/attn/; s/sm90::=/VT=/; s/# kernels,flashattn_//; s/hdim=128,//'; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
