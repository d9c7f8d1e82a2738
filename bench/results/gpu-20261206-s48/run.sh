#!/usr/bin/env bash
# Forty-eighth session's device call. Library and GPU tests: build-full (sm_90a, every head dim)
# with this session's varlen tail (rows past cu_seqlens[batch]: src/common/varlen_tail.hpp,
# src/cuda/varlen_tail.cu), carried as build-lead/s48/{lib,gpu-tests}.xz; the forty-seventh
# session's library (build-lead/s47/lib.xz, same kernels, no tail kernel) for the cost A/B.
# On any card: (1) the varlen / KV-cache / fp8 GPU tests (the new *tail* cases among them) under
# the default dispatch and with the sm80 path forced; (2) compute-sanitizer memcheck on the tail
# cases; (3) test_varlen.py on CUDA; (4) bench_varlen.py (default dispatch) with the old and the new
# library, alternated, for the tail kernel's cost. First, only on an H200: three bench_fp8.py
# processes (issue 9's fp8 / bf16 ratio). Run from the repository root with $OUT set.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s48/lib.xz > /tmp/new.so; xz -dc build-lead/s47/lib.xz > /tmp/old.so
xz -dc build-lead/s48/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
export FLASHATTN_LIBRARY=/tmp/new.so
t0=$SECONDS
case "$name" in
  *H200*)
    for r in 0 1 2; do
      timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
    done
    grep -h ',16384,' $L/fp8-r*.csv | head -30 ;;
  *) echo "not an H200: no fp8 benchmark" ;;
esac
F='*Varlen*:*varlen*:*KvCache*:*Kvcache*:*Fp8*'
timeout 200 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-default.log 2>&1
echo "tests default rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-default.log; grep -E '^\[  FAILED' $L/tests-default.log | head
FLASHATTN_DISABLE_SM90=1 timeout 200 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/tests-sm80.log 2>&1
echo "tests sm80 rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-sm80.log; grep -E '^\[  FAILED' $L/tests-sm80.log | head
echo "tail cases: $(/tmp/gt --gtest_filter='*tail*' --gtest_list_tests | grep -c tail)"
timeout 150 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='*tail*' --gtest_brief=1 > $L/memcheck-tail.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -3 $L/memcheck-tail.log
(cd python/tests && timeout 200 python3 -m pytest -q -x test_varlen.py > $L/pytest-varlen.log 2>&1)
echo "pytest rc=$? t=$((SECONDS-t0))"; tail -2 $L/pytest-varlen.log
for r in 0 1; do
  for lib in old new; do
    FLASHATTN_LIBRARY=/tmp/$lib.so FA_VARLEN_ROUNDS=3 timeout 100 python3 bench/gpu/bench_varlen.py $L/varlen-$lib-r$r.csv --modes default > $L/varlen-$lib-r$r.log 2>&1
    echo "varlen $lib r$r rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
