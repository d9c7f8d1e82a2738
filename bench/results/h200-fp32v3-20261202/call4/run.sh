#!/usr/bin/env bash
# Session 21, device call 4: fp32 "v5" (the backward's whole visible tiles without softcap/ALiBi/dropout take a
# branch-free dS loop) against v4 (e4f016c): backward fp32 GPU tests, sanitizers, a two-round A/B at 2k tokens.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/lib_v4.so.xz > /tmp/libA.so
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
t0=$SECONDS
timeout 120 /tmp/gpu_tests --gtest_brief=1 --gtest_filter='*Backward*f32*:*Determinism*f32*:*Edge*f32*:*Empty*f32*:*CAbi*f32*' > $O/gpu-f32-bwd.log 2>&1; echo "f32 bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "^\[====|PASSED \]|FAILED" $O/gpu-f32-bwd.log | head -12
RB='Small/Backward*cuda_f32*q17_k113_h4x2*:Small/Backward*cuda_f32*q113_k17_h4x2*'
for tool in racecheck synccheck memcheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RB" > $O/san-$tool.log 2>&1
  echo "$tool rc=$? t=$((SECONDS-t0))"; tail -n 1 $O/san-$tool.log
done
for r in 0 1; do
  for cfg in A B; do
    FLASHATTN_LIBRARY=/tmp/lib$cfg.so timeout 100 python3 bench/gpu/bench_fp32.py $O/ab-r$r-$cfg.csv \
      --impls flashattn --seqlens 2048 --no-accuracy --label $cfg > /dev/null 2>&1
    echo "ab r$r $cfg rc=$? t=$((SECONDS-t0))"
  done
done
cat $O/ab-r*.csv | grep -v "^#\|^impl" | grep "fwd+bwd" | sort -t, -k2,2n -k3,3n -k8,8 | awk -F, '{printf "%s d%s c%s %s %s %s\n",$8,$2,$3,$5,$6,$7}'
cd $OUT && tar czf logs.tgz logs
