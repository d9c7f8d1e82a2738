#!/usr/bin/env bash
# v with its own head dim on the H200. A = every CUDA path on zero-padded copies
# (ec5d8dd), B = the Hopper forward bounding each TMA map by its own head dim.
# GPU tests (B; sm90a default and sm80 forced), memcheck, CLI check, pytest,
# then the benchmark with A and B alternated, two rounds.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/hdv
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
cp /tmp/B.so /tmp/libflashattn.so.0
xz -dc $D/flashattn_gpu_tests.xz > /tmp/flashattn_gpu_tests; chmod +x /tmp/flashattn_gpu_tests
xz -dc $D/flashattn.xz > /tmp/flashattn; chmod +x /tmp/flashattn
export LD_LIBRARY_PATH=/tmp PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
F='HeadDimV/*:*_dv*:*Invalid*:*OneHeadDim*'
/tmp/flashattn_gpu_tests --gtest_filter="$F" --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -2 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
FLASHATTN_DISABLE_SM90=1 /tmp/flashattn_gpu_tests --gtest_filter="$F" --gtest_brief=1 > $L/gpu-tests-sm80.log 2>&1; echo "gpu tests sm80 rc=$? $(tail -2 $L/gpu-tests-sm80.log | tr '\n' ' ') t=$((SECONDS-t0))"
/tmp/flashattn_gpu_tests --gtest_filter='Small/Forward.*q17_k113*:Small/Backward.*bf16*q17_k113*:Features/Forward.*:ManyTiles/*:*Varlen*' --gtest_brief=1 > $L/gpu-tests-regress.log 2>&1; echo "regress rc=$? $(tail -2 $L/gpu-tests-regress.log | tr '\n' ' ') t=$((SECONDS-t0))"
timeout 240 compute-sanitizer --tool memcheck /tmp/flashattn_gpu_tests --gtest_filter='HeadDimV/*q17*:HeadDimV/*q1_k267*' --gtest_brief=1 > $L/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1) t=$((SECONDS-t0))"
timeout 120 compute-sanitizer --tool racecheck /tmp/flashattn_gpu_tests --gtest_filter='HeadDimV/Forward.*bf16*q17*' --gtest_brief=1 > $L/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $L/racecheck.log | tail -1) t=$((SECONDS-t0))"
/tmp/flashattn run --device cuda --dtype bf16 --head-dim 192 --head-dim-v 128 --backward --heads 4 --heads-kv 2 --seqlen-q 77 --seqlen-k 133 --causal --check --repeat 1 > $L/cli-check.log 2>&1; echo "cli check rc=$? $(tail -1 $L/cli-check.log) t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so timeout 200 python3 -m pytest python/tests/test_head_dim_v.py -q > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
for r in 1 2; do
  order="A B"; [ $r = 2 ] && order="B A"
  for x in $order; do
    FLASHATTN_LIBRARY=/tmp/$x.so FLASHATTN_COMMIT=$x timeout 200 python3 bench/gpu/bench_head_dim_v.py $L/r$r-$x.csv > $L/r$r-$x.log 2>&1; echo "bench r$r $x rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/r1-A.csv $L/r1-B.csv; do echo "== $f"; cat $f; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
