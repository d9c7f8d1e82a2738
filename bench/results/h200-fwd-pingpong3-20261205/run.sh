#!/usr/bin/env bash
# Three consumer warpgroups taking turns (pingpong over 0 -> 1 -> 2) in the Hopper forward's
# 192-row kernels (fp8 head dim 128, bf16 head dims 64 and 128). N: built with
# -DFLASHATTN_SM90_DEFS=FLASHATTN_SM90_PINGPONG3=1; O: the same commit without it (the 192-row
# kernels' SASS as before). One device call: the forward-side GPU tests of N with every head-dim-64/128
# 16-bit call forced onto 192 rows, racecheck / synccheck on small cases, then N against O,
# alternated processes, two rounds: bench_fp8 (fp8 and bf16 head dim 128) and bench_peers
# (head dim 64 forward, flashattn only).
set -u
L=/tmp/l; mkdir -p $L/n $L/o $OUT/r; R=$OUT/r
B=build-lead/pp
xz -dc $B/new.so.xz > $L/n/libflashattn.so.0 && xz -dc $B/old.so.xz > $L/o/libflashattn.so.0
xz -dc $B/tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $R/gpu.txt
t0=$SECONDS
F='*/Forward.*:*Fp8Forward*:*KvCache*:*VarlenForward*:Edge/*'
FLASHATTN_SM90_HD128_BLOCKM=192 FLASHATTN_SM90_HD64_BLOCKM=192 timeout 150 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-192.log 2>&1
echo "tests-192 rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/tests-192.log | tr '\n' ' ') t=$((SECONDS-t0))"
S='Small/Forward.*d64*:Small/Forward.*d128*:Sweep/Fp8Forward.*q113_k267*d128*:Sweep/Fp8Forward.*q267_k113*d128*'
for tool in racecheck synccheck; do
  FLASHATTN_SM90_HD128_BLOCKM=192 FLASHATTN_SM90_HD64_BLOCKM=192 timeout 70 compute-sanitizer --tool $tool --print-limit 10 \
    $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
for r in 1 2; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 90 python3 bench/gpu/bench_fp8.py $R/fp8-$v-r$r.csv --hdims 128 \
      --seqlens 2048,8192,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 0 > $R/fp8-$v-r$r.log 2>&1
    echo "fp8 r$r $v rc=$? t=$((SECONDS-t0))"
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_peers.py $R/d64-$v-r$r.csv --hdims 64 \
      --seqlens 1024,4096,16384 --passes fwd --impls flashattn > $R/d64-$v-r$r.log 2>&1
    echo "d64 r$r $v rc=$? t=$((SECONDS-t0))"
  done
done
