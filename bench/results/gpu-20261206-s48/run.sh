#!/usr/bin/env bash
# Forty-eighth session, first device call (the forty-seventh session's script again: no H200 was lent then): issue 9's fp8 / bf16 ratio on an H200 at the forty-sixth
# session's fp8 kernels (the V transpose at the copy rate; head dim 128's padded calls on the
# per-sequence kernel), which have only run on H100s. (1) On any card: the fp8 GPU tests (padded,
# varlen, C ABI) with this session's fp8_vt_row_keys helper. (2) Only on an H200: three
# bench_fp8.py processes (flashattn fp8 / flashattn bf16 / SDPA cuDNN bf16, head dims 128 and 256,
# 512-16k, causal and not). Library and tests: build-full at dccbcdc (sm_90a, every head dim)
# carried as build-lead/s47/{lib,gpu-tests}.xz. Run from the repository root with $OUT set;
# logs.tgz comes back.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s47/lib.xz > /tmp/libflashattn.so; export FLASHATTN_LIBRARY=/tmp/libflashattn.so
xz -dc build-lead/s47/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
timeout 120 /tmp/gt --gtest_filter='*Fp8*' > $L/tests-fp8.log 2>&1
echo "fp8 tests rc=$? t=$((SECONDS-t0))"; tail -3 $L/tests-fp8.log; grep -E '^\[  FAILED' $L/tests-fp8.log | head
case "$name" in *H200*) ;; *) echo "not an H200: no benchmark"; cd $OUT && tar czf logs.tgz logs && rm -rf logs; exit 0 ;; esac
for r in 0 1 2; do
  timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
done
grep -h ',16384,' $L/fp8-r*.csv | head -30
cd $OUT && tar czf logs.tgz logs && rm -rf logs
