#!/usr/bin/env bash
# The lazy Hopper forward kernels' softmax without the row max on kept tiles (softmax.cuh
# exp_kept; kernel.cuh softmax_tile, serial and overlapped loops): N = the working tree,
# O = 1a0476f (HEAD), both full sm_90a builds of build-full (build-lead/ab/new.so.xz,
# build-lead/base/lib.xz). 1. N's GPU tests: the forward-side sweep with head dim 128 forced
# onto 192-row tiles (FLASHATTN_SM90_HD128_BLOCKM=192: the bf16/fp16 serial kernel), then the
# default dispatch for the other changed kernels (head dims 64 and 256, fp8); a mutant that keeps
# every tile whatever the vote (build-lead/ab/mutant-tests.xz) on the cases that must catch it;
# 2. racecheck / synccheck on small cases; 3. A/B, N and O alternated: bench_peers forward
# (flashattn, cuDNN) and bench_fp8 (fp8, bf16). Benchmarks are skipped past 290-315 s (device budget).
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt; cat $R/gpu.txt
xz -dc build-lead/ab/new.so.xz > $L/n/libflashattn.so.0
xz -dc build-lead/base/lib.xz > $L/o/libflashattn.so.0
xz -dc build-lead/ab/tests.xz > $L/t && chmod +x $L/t
xz -dc build-lead/ab/mutant-tests.xz > $L/m && chmod +x $L/m
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
left() { [ $((SECONDS - t0)) -lt $1 ]; }
sum() { echo "$1 rc=$2 $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $3 | tr '\n' ' ') t=$((SECONDS-t0))"; grep FAILED $3 | head -${4:-6}; }
F='*/Forward.*d128*:Sweep/Fp8Forward.*:Edge/*:Sweep/VarlenForward.*d128*:Sweep/KvCache.*d128*'
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 90 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-192.log 2>&1; sum tests-192 $? $R/tests-192.log
F='*/Forward.*d64*:*/Forward.*d256*:Sweep/VarlenForward.*d256*:Sweep/VarlenForward.*d64*'
timeout 60 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-d64-d256.log 2>&1; sum tests-d64-d256 $? $R/tests-d64-d256.log
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 40 $L/m --gtest_brief=1 \
  --gtest_filter='Edge/EdgeClimbingLogits.*cuda*:Sweep/Fp8Forward.*ramp*:Small/Forward.*bf16*d128*:Small/Forward.*bf16*d256*' > $R/tests-mutant.log 2>&1
sum mutant $? $R/tests-mutant.log 14
S='Small/Forward.*bf16*d128*:Small/Forward.*bf16*d256*:Edge/EdgeClimbingLogits.*cuda*:Sweep/Fp8Forward.*d128*ramp*'
for tool in racecheck synccheck; do
  FLASHATTN_SM90_HD128_BLOCKM=192 timeout 35 compute-sanitizer --tool $tool --print-limit 10 \
    $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
for r in 1 2; do
  for v in n o; do
    left 290 || break
    H=64,128,256; [ $r = 2 ] && H=128
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_peers.py $R/bf16-$v-r$r.csv --hdims $H \
      --passes fwd --impls flashattn,sdpa_cudnn > $R/bf16-$v-r$r.log 2>&1
    left 315 || break
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 45 python3 bench/gpu/bench_fp8.py $R/fp8-$v-r$r.csv --hdims 128,256 \
      --impls flashattn_bf16,flashattn_fp8 --error-seqlen 0 > $R/fp8-$v-r$r.log 2>&1
    echo "r$r $v t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf t.tgz t && rm -rf t
