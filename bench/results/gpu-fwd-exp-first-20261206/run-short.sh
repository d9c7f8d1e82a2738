#!/usr/bin/env bash
# run.sh cut to the device budget left (about 300 s): N's head-dim-128 tests on 192-row tiles,
# the mutant, racecheck on small cases, then one A/B round (N, O, N, O) of head dim 128:
# bench_peers forward (flashattn, cuDNN) and bench_fp8 (fp8, bf16).
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
F='*/Forward.*d128*:Sweep/Fp8Forward.*:Edge/EdgeClimbingLogits.*:Edge/EdgeLargeLogits.*:Edge/EdgeShapes.RowsWithoutKeys*'
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 80 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-192.log 2>&1; sum tests-192 $? $R/tests-192.log
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 30 $L/m --gtest_brief=1 \
  --gtest_filter='Edge/EdgeClimbingLogits.*cuda*:Sweep/Fp8Forward.*ramp*' > $R/tests-mutant.log 2>&1
sum mutant $? $R/tests-mutant.log 10
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 30 compute-sanitizer --tool racecheck --print-limit 10 $L/t --gtest_brief=1 \
  --gtest_filter='Edge/EdgeClimbingLogits.*cuda*:Sweep/Fp8Forward.*d128*ramp*' > $R/san-racecheck.log 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $R/san-racecheck.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-racecheck.log | tr '\n' ' ') t=$((SECONDS-t0))"
for r in 1 2; do
  for v in n o; do
    left 250 || break
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 30 python3 bench/gpu/bench_peers.py $R/bf16-$v-r$r.csv --hdims 128 \
      --seqlens 2048,4096,8192,16384 --causal 0 --passes fwd --impls flashattn,sdpa_cudnn > $R/bf16-$v-r$r.log 2>&1
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 30 python3 bench/gpu/bench_fp8.py $R/fp8-$v-r$r.csv --hdims 128 \
      --seqlens 2048,4096,8192,16384 --impls flashattn_bf16,flashattn_fp8 --error-seqlen 0 > $R/fp8-$v-r$r.log 2>&1
    echo "r$r $v t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf t.tgz t && rm -rf t
