#!/usr/bin/env bash
# Forty-ninth session's device call: head dims that are not multiples of 8 (zero-padded copies,
# src/common/head_dim_pad.hpp; the copy kernel's chunks below 16 bytes, src/cuda/head_dim_pad.cu),
# and the varlen tail kernel taking its store widths in varlen_tail::Rows (no stack frame).
# Library and GPU tests: build-full (sm_90a, every head dim) at this session's change, carried as
# build-lead/s49/{lib,gpu-tests}.xz. On any card: (1) the head-dim, fp8, varlen, KV-cache and
# argument GPU tests under the default dispatch and with the sm80 path forced; (2) compute-sanitizer
# memcheck on the OddHeadDim and varlen tail cases; (3) test_head_dim_v.py on CUDA; (4) bench_head_dim_v.py at
# 100:100, 36:36 and 192:128 (what the copies cost against the kernels at the padded width, and
# SDPA's backends on the same tensors). On an H200 only, first: three bench_fp8.py processes
# (issue 9's fp8 / bf16 ratio; the fp8 kernels are those of the forty-sixth session).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s49/lib.xz > /tmp/lib.so; xz -dc build-lead/s49/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
case "$name" in
  *H200*)
    for r in 0 1 2; do
      timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
    done
    grep -h ',16384,' $L/fp8-r*.csv | head -30 ;;
  *) echo "not an H200: no fp8 benchmark" ;;
esac
F='*HeadDim*:*Fp8*:*Varlen*:*varlen*:*KvCache*:*Invalid*'
timeout 240 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-default.log 2>&1
echo "tests default rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-default.log; grep -E '^\[  FAILED' $L/tests-default.log | head
FLASHATTN_DISABLE_SM90=1 timeout 200 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-sm80.log 2>&1
echo "tests sm80 rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-sm80.log; grep -E '^\[  FAILED' $L/tests-sm80.log | head
echo "odd head-dim cases: $(/tmp/gt --gtest_filter='*OddHeadDim*' --gtest_list_tests | grep -c cuda)"
timeout 150 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='*OddHeadDim*:*HeadDimLimits*:*tail*' --gtest_brief=1 > $L/memcheck-odd.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -3 $L/memcheck-odd.log
(cd python/tests && timeout 200 python3 -m pytest -q test_head_dim_v.py > $L/pytest-head-dim.log 2>&1)
echo "pytest rc=$? t=$((SECONDS-t0))"; tail -2 $L/pytest-head-dim.log
timeout 150 python3 bench/gpu/bench_head_dim_v.py $L/bench-head-dim.csv --dims 100:100,36:36,192:128 > $L/bench-head-dim.log 2>&1
echo "bench rc=$? t=$((SECONDS-t0))"; grep -E '^flashattn|^sdpa' $L/bench-head-dim.csv | grep ',16384,' | head -40
cd $OUT && tar czf logs.tgz logs && rm -rf logs
