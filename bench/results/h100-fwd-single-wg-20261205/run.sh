#!/usr/bin/env bash
# The single-warpgroup forward tile (64 query rows, one consumer warpgroup, two CTAs per SM;
# kernel_args.hpp kSingleWGBlockM) against the library's default tiles. One library: the working
# tree (head dims 64 and 128, archs 90a; build-lead/pp/n.so.xz, its gtest binary tests.xz), the
# tile forced per process by FLASHATTN_SM90_HD{64,128}_BLOCKM=64. Forward tests with the 64-row
# tile forced on every eligible call, racecheck / synccheck on small cases, then
# bench_short_calls.py (kernel time, flashattn and SDPA cuDNN in every process), def / m64
# alternated, two rounds.
set -u
L=/tmp/l; mkdir -p $L/n; R=$OUT/r; mkdir -p $R
B=build-lead/pp
xz -dc $B/n.so.xz > $L/n/libflashattn.so.0
xz -dc $B/tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=$L/n/libflashattn.so.0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $R/gpu.txt
t0=$SECONDS
M64="FLASHATTN_SM90_HD64_BLOCKM=64 FLASHATTN_SM90_HD128_BLOCKM=64"
F='*/Forward.*d64*:*/Forward.*d128*:*KvCache*:*VarlenForward*:Edge/*'
env $M64 timeout 150 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-m64.log 2>&1
echo "tests-m64 rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/tests-m64.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $R/tests-m64.log | head -5
S='Small/Forward.*d64*:Small/Forward.*d128*'
for tool in racecheck synccheck; do
  env $M64 timeout 60 compute-sanitizer --tool $tool --print-limit 10 \
    $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
for r in 1 2; do
  for s in def m64; do
    [ $s = m64 ] && env=$M64 || env=""
    env $env timeout 90 python3 bench/gpu/bench_short_calls.py $R/$s-r$r.csv --pass fwd --hdims 64,128 \
      --seqlens 512,1024,2048,4096,8192 --causal 0,1 > $R/$s-r$r.log 2>&1
    echo "r$r $s rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
