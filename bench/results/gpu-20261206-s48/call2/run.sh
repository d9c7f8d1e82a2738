#!/usr/bin/env bash
# Forty-eighth session, second device call: the varlen tail kernel launched with programmatic
# dependent launch (build-lead/s48b: build-full with src/cuda/varlen_tail.cu's PDL launch and
# griddepcontrol.wait) against the plain launch (build-lead/s48/lib.xz, the first call's library)
# and the forty-seventh session's library without a tail kernel (build-lead/s47/lib.xz).
# (1) the varlen / fp8 / KV-cache GPU tests with the PDL build, memcheck of the tail cases;
# (2) bench/gpu/bench_varlen_tail.py, three libraries alternated, three rounds;
# (3) bench_varlen.py (default dispatch) once per library. Only on an H200 first: three
# bench_fp8.py processes (issue 9). Run from the repository root with $OUT set.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s48b/lib.xz > /tmp/pdl.so; xz -dc build-lead/s48/lib.xz > /tmp/plain.so; xz -dc build-lead/s47/lib.xz > /tmp/old.so
xz -dc build-lead/s48b/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
export FLASHATTN_LIBRARY=/tmp/pdl.so
t0=$SECONDS
case "$name" in
  *H200*)
    for r in 0 1 2; do
      timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
    done
    grep -h ',16384,' $L/fp8-r*.csv | head -30 ;;
  *) echo "not an H200: no fp8 benchmark" ;;
esac
timeout 200 /tmp/gt --gtest_filter='*Varlen*:*varlen*:*KvCache*:*Fp8*' --gtest_brief=1 > $L/tests-pdl.log 2>&1
echo "tests pdl rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-pdl.log; grep -E '^\[  FAILED' $L/tests-pdl.log | head
timeout 150 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='*tail*' --gtest_brief=1 > $L/memcheck-tail-pdl.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -2 $L/memcheck-tail-pdl.log
for r in 0 1 2; do
  for lib in old plain pdl; do
    FLASHATTN_LIBRARY=/tmp/$lib.so timeout 60 python3 bench/gpu/bench_varlen_tail.py $L/tail-$lib-r$r.csv > $L/tail-$lib-r$r.log 2>&1
    echo "tail bench $lib r$r rc=$? t=$((SECONDS-t0))"
  done
done
for lib in old plain pdl; do
  FLASHATTN_LIBRARY=/tmp/$lib.so FA_VARLEN_ROUNDS=3 timeout 100 python3 bench/gpu/bench_varlen.py $L/varlen-$lib.csv --modes default > $L/varlen-$lib.log 2>&1
  echo "varlen $lib rc=$? t=$((SECONDS-t0))"
done
cat $L/tail-*-r*.csv | grep -v '^lib' | sort -t, -k2,4 | sed 's|/tmp/||'
cd $OUT && tar czf logs.tgz logs && rm -rf logs
