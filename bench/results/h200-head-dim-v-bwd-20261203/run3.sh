#!/usr/bin/env bash
# v's own head dim in the Hopper backward without copies. A = 4ab6edf's
# kernels (the backward on zero-padded copies, 192 tile), B = per-operand
# TMA bounds in the backward (q/k/dq/dk at D, v/dout/dv at Dv). GPU tests
# (HeadDimV, varlen dv, invalid args, edge, 192), sanitizers on small Dv != D
# backward cases, pytest, then the backward benchmark A/B alternated.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/dvbwd
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
cp /tmp/B.so /tmp/libflashattn.so.0
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export LD_LIBRARY_PATH=/tmp PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
F='HeadDimV/*:*_dv*:*Invalid*:*HeadDimV*:*HeadDim192*:*Varlen*:*CudaVariants*'
timeout 300 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -2 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
FLASHATTN_DISABLE_SM90=1 timeout 200 /tmp/gt --gtest_filter='HeadDimV/*:*_dv*' --gtest_brief=1 > $L/gpu-tests-sm80.log 2>&1; echo "gpu tests sm80 rc=$? $(tail -2 $L/gpu-tests-sm80.log | tr '\n' ' ') t=$((SECONDS-t0))"
S='HeadDimV/Backward.*16*q113_k113*:HeadDimV/Backward.*bf16*q17_k113*:HeadDimV/Backward.*bf16*q267*'
timeout 150 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter="$S" --gtest_brief=1 > $L/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1) $(grep -E 'PASSED|FAILED' $L/memcheck.log | tail -1) t=$((SECONDS-t0))"
timeout 150 compute-sanitizer --tool racecheck /tmp/gt --gtest_filter="$S" --gtest_brief=1 > $L/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tail -1) t=$((SECONDS-t0))"
timeout 100 compute-sanitizer --tool synccheck /tmp/gt --gtest_filter="$S" --gtest_brief=1 > $L/synccheck.log 2>&1; echo "synccheck rc=$? $(grep -E 'ERROR SUMMARY' $L/synccheck.log | tail -1) t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so timeout 200 python3 -m pytest python/tests/test_head_dim_v.py -q > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
for r in 1 2; do
  order="A B"; [ $r = 2 ] && order="B A"
  for x in $order; do
    FLASHATTN_LIBRARY=/tmp/$x.so FLASHATTN_COMMIT=$x timeout 120 python3 bench/gpu/bench_head_dim_v.py $L/hdv-r$r-$x.csv --passes bwd --dims 192:128,128:192 > $L/hdv-r$r-$x.log 2>&1; echo "hdv r$r $x rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/hdv-r1-A.csv $L/hdv-r1-B.csv; do echo "== $f"; grep -v sdpa_flash $f; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
