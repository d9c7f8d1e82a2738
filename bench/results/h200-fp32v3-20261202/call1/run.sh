#!/usr/bin/env bash
# Session 21, device call 1: fp32 CUDA v3 (backward: dK/dV 32-query tiles with Q/dO double-buffered by cp.async,
# dQ's K/V by cp.async, score pitch +8; forward: tile variants behind FLASHATTN_F32_FWD_V, an experiment switch).
# Correctness of every variant, racecheck/synccheck, then an A/B of v2 (libA) against v3 (libB, variants 0/1/2).
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/lib_v2.so.xz > /tmp/libA.so
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
t0=$SECONDS
timeout 150 /tmp/gpu_tests --gtest_brief=1 --gtest_filter='*f32*' > $O/gpu-f32-v0.log 2>&1; echo "f32 tests v0 rc=$? t=$((SECONDS-t0))"
grep -E "^\[====|PASSED \]|FAILED" $O/gpu-f32-v0.log | head -12
FF='*Forward*f32*:*KvCache*f32*:*VarlenForward*f32*:*Edge*f32*:*Empty*f32*'
for v in 1 2; do
  FLASHATTN_F32_FWD_V=$v timeout 100 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$FF" > $O/gpu-f32-v$v.log 2>&1
  echo "f32 fwd tests v$v rc=$? t=$((SECONDS-t0))"; grep -E "^\[====|PASSED \]|FAILED" $O/gpu-f32-v$v.log | head -8
done
# A/B, two rounds, libraries alternated; SDPA efficient in the v2 process as the control.
for r in 0 1; do
  for cfg in A0 B0 B1 B2; do
    lib=${cfg:0:1}; v=${cfg:1:1}; impls=flashattn; [ $cfg = A0 ] && impls=flashattn,sdpa_efficient
    FLASHATTN_LIBRARY=/tmp/lib$lib.so FLASHATTN_F32_FWD_V=$v timeout 150 python3 bench/gpu/bench_fp32.py $O/ab-r$r-$cfg.csv \
      --impls $impls --seqlens 2048 --no-accuracy --label $cfg > $O/ab-r$r-$cfg.log 2>&1
    echo "ab r$r $cfg rc=$? t=$((SECONDS-t0))"
  done
done
cat $O/ab-r*.csv | grep -v "^#\|^impl" | sort -t, -k2,2n -k3,3n -k5,5 -k8,8 | awk -F, '{printf "%s d%s c%s %s %s %s\n",$8 ($1=="flashattn"?"":"-"$1),$2,$3,$5,$6,$7}'
RB='Small/Backward*cuda_f32*q17_k113_h4x2*:Small/Backward*cuda_f32*q113_k17_h4x2*:*VarlenBackward*f32*'
RF='Small/Forward*cuda_f32*q113_k17_h4x2*:*KvCache*f32*page*'
timeout 90 compute-sanitizer --tool racecheck --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RB" > $O/san-racecheck-bwd.log 2>&1
echo "racecheck bwd rc=$? t=$((SECONDS-t0))"; tail -n 2 $O/san-racecheck-bwd.log
for v in 0 1 2; do
  FLASHATTN_F32_FWD_V=$v timeout 60 compute-sanitizer --tool racecheck --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RF" > $O/san-racecheck-fwd-v$v.log 2>&1
  echo "racecheck fwd v$v rc=$? t=$((SECONDS-t0))"; tail -n 2 $O/san-racecheck-fwd-v$v.log
done
for v in 0 1 2; do
  FLASHATTN_F32_FWD_V=$v timeout 40 compute-sanitizer --tool synccheck --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RB:$RF" > $O/san-synccheck-v$v.log 2>&1
  echo "synccheck v$v rc=$? t=$((SECONDS-t0))"; tail -n 1 $O/san-synccheck-v$v.log
done
timeout 40 compute-sanitizer --tool memcheck --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$RB:$RF" > $O/san-memcheck.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; tail -n 1 $O/san-memcheck.log
cd $OUT && tar czf logs.tgz logs
