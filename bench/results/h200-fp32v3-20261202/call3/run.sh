#!/usr/bin/env bash
# Session 21, device call 3: fp32 "v4" (loads with one add per copy, branch-free scores on whole tiles) against v3
# (40f34f8): fp32 GPU tests and sanitizers, a two-round A/B at 2k tokens, the full grid with v4.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/lib_v3.so.xz > /tmp/libA.so
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
t0=$SECONDS
timeout 150 /tmp/gpu_tests --gtest_brief=1 --gtest_filter='*f32*' > $O/gpu-f32.log 2>&1; echo "f32 tests rc=$? t=$((SECONDS-t0))"
grep -E "^\[====|PASSED \]|FAILED" $O/gpu-f32.log | head -12
RF='Small/Forward*cuda_f32*q113_k17_h4x2*:Small/Forward*cuda_f32*q17_k113_h4x2*:*KvCache*f32*page*:*VarlenForward*f32*:Small/Backward*cuda_f32*q17_k113_h4x2*:*VarlenBackward*f32*'
for tool in racecheck synccheck memcheck; do
  timeout 80 compute-sanitizer --tool $tool --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RF" > $O/san-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; tail -n 1 $O/san-$tool.log
done
for r in 0 1; do
  for cfg in A B; do
    impls=flashattn; [ $cfg = A ] && impls=flashattn,sdpa_efficient
    FLASHATTN_LIBRARY=/tmp/lib$cfg.so timeout 150 python3 bench/gpu/bench_fp32.py $O/ab-r$r-$cfg.csv \
      --impls $impls --seqlens 2048 --no-accuracy --label $cfg > /dev/null 2>&1
    echo "ab r$r $cfg rc=$? t=$((SECONDS-t0))"
  done
done
cat $O/ab-r*.csv | grep -v "^#\|^impl" | sort -t, -k2,2n -k3,3n -k5,5 -k8,8 | awk -F, '{printf "%s d%s c%s %s %s %s\n",$8 ($1=="flashattn"?"":"-"$1),$2,$3,$5,$6,$7}'
FLASHATTN_LIBRARY=/tmp/libB.so timeout 240 python3 bench/gpu/bench_fp32.py $O/h200-fp32.csv > $O/bench-fp32.log 2>&1; echo "bench rc=$? t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs
