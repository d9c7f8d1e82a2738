#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck on the head-dim-128 forward cases whose tile the wave rule
# (fb46aa5) now picks (unmasked, padded, 16-bit, more than 128 query rows), GPU test binary of 7df3d4b.
set -u
mkdir -p $OUT/logs && xz -dc build-lead/san31/gpu_tests.xz > /tmp/gt && chmod +x /tmp/gt
F='*Forward.MatchesReference/cuda_bf16_*q267*d128*:*Forward.MatchesReference/cuda_f16_*q1030*d128*:ManyTiles/Forward.*cuda*d128*-*causal*:*window*:*wl*'
for tool in memcheck racecheck; do
  timeout 280 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $OUT/logs/$tool.log 2>&1
  echo "$tool rc=$?"; tail -4 $OUT/logs/$tool.log
done
