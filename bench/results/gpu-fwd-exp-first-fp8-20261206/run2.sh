#!/usr/bin/env bash
# Second call: the step in every lazy kernel (FLASHATTN_SM90_EXP_FIRST=1), with the redo moving
# the references to the rows' maxima (softmax.cuh step<true>). N: build-n (sm_90a, every head dim,
# the knob at 1; build-lead/ab/n1.so.xz, tests n1-tests.xz); O: build-full at the knob's default 0
# (build-lead/base/lib.xz). 1. N's forward-side GPU tests at the default dispatch, then head dim 128
# forced onto 192 rows; 2. racecheck / synccheck on small lazy-kernel cases; 3. N O O N N O:
# bench_peers forward (flashattn only; head dims 64 / 192 / 256, the lazy 16-bit kernels, 1k-16k,
# causal and not) and bench_fp8 (fp8 only, head dims 128 / 256, 1k-16k, causal and not).
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt; cat $R/gpu.txt
xz -dc build-lead/ab/n1.so.xz > $L/n/libflashattn.so.0
xz -dc build-lead/base/lib.xz > $L/o/libflashattn.so.0
xz -dc build-lead/ab/n1-tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
sum() { echo "$1 rc=$2 $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $3 | tr '\n' ' ') t=$((SECONDS-t0))"; grep FAILED $3 | head -${4:-8}; }
F='*/Forward.*:Sweep/Fp8Forward.*:Edge/*:Sweep/VarlenForward.*:Sweep/KvCache*:*HeadDimV*'
timeout 150 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests.log 2>&1; sum tests $? $R/tests.log
F='*/Forward.*d128*:Edge/EdgeClimbingLogits.*:Sweep/VarlenForward.*d128*'
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 60 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-192.log 2>&1; sum tests-192 $? $R/tests-192.log
S='Small/*bf16_b*_q113_k113_*d64*:Small/*_f16_b*_q17_k113_*d256*:Small/*bf16_b*_q113_k17_*d192*:Edge/EdgeClimbingLogits.*cuda*:Sweep/Fp8Forward.*d256*ramp*'
for tool in racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
r=0
for v in n o o n n o; do
  r=$((r+1)); [ $((SECONDS - t0)) -lt 430 ] || break
  FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_peers.py $R/bf16-$r-$v.csv --hdims 64,192,256 \
    --seqlens 1024,2048,4096,8192,16384 --passes fwd --impls flashattn > $R/bf16-$r-$v.log 2>&1
  FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 45 python3 bench/gpu/bench_fp8.py $R/fp8-$r-$v.csv --hdims 128,256 \
    --seqlens 1024,2048,4096,8192,16384 --impls flashattn_fp8 --error-seqlen 0 > $R/fp8-$r-$v.log 2>&1
  echo "round $r $v t=$((SECONDS-t0))"
done
cd $OUT && tar czf t.tgz t && rm -rf t
