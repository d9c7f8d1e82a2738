#!/usr/bin/env bash
# The single-warpgroup forward tile as the default for short causal calls (tile_rules.hpp
# single_wg_tiles_pay). N: the working tree (build-lead/pp/n.so.xz, gtest binary tests.xz), O: the
# library before the change (base.so.xz, 8a89c7c's sm90 code), both head dims 64 and 128, archs
# 90a. N's forward tests with its default tiles; then bench_short_calls.py (kernel time,
# flashattn and SDPA cuDNN in every process) and bench_peers.py (CUDA-event time, cuDNN and
# FA2), N / O alternated, two rounds.
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/r; mkdir -p $R
B=build-lead/pp
xz -dc $B/n.so.xz > $L/n/libflashattn.so.0 && xz -dc $B/base.so.xz > $L/o/libflashattn.so.0
xz -dc $B/tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $R/gpu.txt
t0=$SECONDS
F='*/Forward.*d64*:*/Forward.*d128*:*KvCache*:*VarlenForward*:Edge/*'
timeout 150 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-default.log 2>&1
echo "tests-default rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/tests-default.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $R/tests-default.log | head -5
for r in 1 2; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_short_calls.py $R/$v-r$r.csv \
      --pass fwd --hdims 64,128 --seqlens 512,1024,2048 --causal 0,1 > $R/$v-r$r.log 2>&1
    echo "short r$r $v rc=$? t=$((SECONDS-t0))"
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_peers.py $R/peers-$v-r$r.csv \
      --hdims 64,128 --seqlens 512,1024 --causal 1 --passes fwd > $R/peers-$v-r$r.log 2>&1
    echo "peers r$r $v rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
