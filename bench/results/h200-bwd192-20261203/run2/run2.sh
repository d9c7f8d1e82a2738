#!/usr/bin/env bash
# The split backward's cross-warpgroup barriers without .aligned (synccheck
# flagged bar.sync reached from the two consumer instantiations at head dim
# 192). synccheck / racecheck on 192 and 256 padded and varlen backward
# cases, the 192 tests again, then head dim 256's backward A vs B (its SASS
# changed only in register numbers) and 192 once more, alternated.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/bwd192
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
cp /tmp/B.so /tmp/libflashattn.so.0
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export LD_LIBRARY_PATH=/tmp PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
S='Large/Backward.*bf16*q267_k17_*d192*:Large/Backward.*bf16*q267_k17_*d256*:VarlenIsolation.BackwardNonFinite*'
timeout 150 compute-sanitizer --tool synccheck /tmp/gt --gtest_filter="$S" --gtest_brief=1 > $L/synccheck.log 2>&1; echo "synccheck rc=$? $(grep -E 'ERROR SUMMARY' $L/synccheck.log | tail -1) $(tail -3 $L/synccheck.log | tr '\n' ' ') t=$((SECONDS-t0))"
timeout 150 compute-sanitizer --tool racecheck /tmp/gt --gtest_filter="$S" --gtest_brief=1 > $L/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tail -1) t=$((SECONDS-t0))"
timeout 100 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='VarlenIsolation.BackwardNonFinite*:*HeadDim192*' --gtest_brief=1 > $L/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1) t=$((SECONDS-t0))"
F='*d192*:*d160*:*d176*:*HeadDim192*:*HeadDim256*:*Varlen*:HeadDimV/*:*CudaVariants.Alibi*'
timeout 300 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/gpu-tests-192.log 2>&1; echo "gpu tests rc=$? $(tail -2 $L/gpu-tests-192.log | tr '\n' ' ') t=$((SECONDS-t0))"
for r in 1 2; do
  order="A B"; [ $r = 2 ] && order="B A"
  for x in $order; do
    FLASHATTN_LIBRARY=/tmp/$x.so FLASHATTN_COMMIT=$x timeout 150 python3 bench/gpu/bench_peers.py $L/peers-r$r-$x.csv --hdims 256,192 --passes bwd --impls flashattn,sdpa_cudnn > $L/peers-r$r-$x.log 2>&1; echo "peers r$r $x rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
