#!/usr/bin/env bash
# Session 20, device call 3: the fp32 CUDA kernels (src/cuda/f32): full GPU sweep (fp32 cases now run),
# sanitizers on small fp32 cases, Python tests, and the fp32 benchmark against SDPA.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export FLASHATTN_LIBRARY=/tmp/libB.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
t0=$SECONDS
timeout 200 /tmp/gpu_tests --gtest_brief=1 --gtest_filter='*f32*' > $O/gpu-f32.log 2>&1; echo "f32 tests rc=$? t=$((SECONDS-t0))"
grep -E "^\[====|PASSED \]|SKIPPED \]|FAILED" $O/gpu-f32.log | head -20
grep -B3 -A10 -m2 "Failure" $O/gpu-f32.log | head -50
grep -A1 "Skipped" $O/gpu-f32.log | grep -v Skipped | sort | uniq -c | sort -rn | head -8
SF='Small/*cuda_f32*q113_k17_h4x2*:Small/*cuda_f32*q17_k113_h4x2*:*KvCache*f32*:*Varlen*f32*'
timeout 60 compute-sanitizer --tool memcheck --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$SF" > $O/san-f32-memcheck.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -n 3 $O/san-f32-memcheck.log
RF='Small/Forward*cuda_f32*q113_k17_h4x2*:Small/Backward*cuda_f32*q17_k113_h4x2*:*KvCache*f32*page*:*Varlen*f32*'
for tool in racecheck synccheck; do
  timeout 80 compute-sanitizer --tool $tool --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RF" > $O/san-f32-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; tail -n 3 $O/san-f32-$tool.log
done
timeout 100 python3 -m pytest -q python/tests/test_varlen.py python/tests/test_torch.py > $O/pytest-f32.log 2>&1; echo "pytest rc=$? t=$((SECONDS-t0))"
tail -n 5 $O/pytest-f32.log; grep -m5 "FAILED\|Error" $O/pytest-f32.log
timeout 240 python3 bench/gpu/bench_fp32.py $O/h200-fp32.csv > $O/bench-fp32.log 2>&1; echo "bench rc=$? t=$((SECONDS-t0))"
grep -v "^#" $O/bench-fp32.log | awk -F, '$3==0 && ($4==1024 || $4==4096)' | head -40
grep "accuracy\|^# .*d" $O/bench-fp32.log | head -24
cd $OUT && tar czf logs.tgz logs
