#!/usr/bin/env bash
# Forty-fifth session: the Hopper backward skips a consumer warpgroup's products for a query
# sub-tile that sees none of its 64 keys (bwd_kernel.cuh keys_unseen; a causal CTA's first step).
# (1) every *Backward* case of the GPU binary (new build); (2) racecheck on 40 causal / window /
# softcap backward cases; (3) A/B: bench_peers.py backward, head dims 64 and 128, causal,
# 512-4k, flashattn and SDPA cuDNN, O (build-lead/ab/base-lib.xz: bcdf4b0's kernels) and N
# (build-lead/new/lib.xz) alternated O N N O O N. Run from the repository root with $OUT set.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
xz -dc build-lead/new/tests.xz > /tmp/t && chmod +x /tmp/t
xz -dc build-lead/new/lib.xz > /tmp/N.so; xz -dc build-lead/ab/base-lib.xz > /tmp/O.so
timeout 240 /tmp/t --gtest_filter='*Backward*' --gtest_brief=1 > $L/bwd-tests.log 2>&1; echo "bwd tests rc=$? t=$((SECONDS-t0))"
grep -E "^\[  FAILED|^\[  PASSED|SKIPPED \]|tests ran" $L/bwd-tests.log | head -20
timeout 150 compute-sanitizer --tool racecheck /tmp/t --gtest_filter='*Backward*cuda_bf16_*q267_k*causal*:*Backward*cuda_bf16_*q113_k267*causal*' --gtest_brief=1 > $L/racecheck.log 2>&1
echo "racecheck rc=$? t=$((SECONDS-t0))"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $L/racecheck.log | tail -3
i=0
for lib in O N N O O N; do
  [ $((SECONDS - t0)) -lt 520 ] || break
  FLASHATTN_LIBRARY=/tmp/$lib.so timeout 60 python3 bench/gpu/bench_peers.py $L/ab-$i-$lib.csv --hdims 64,128 \
    --seqlens 512,1024,2048,4096 --causal 1 --passes bwd --impls flashattn,sdpa_cudnn > $L/ab-$i-$lib.log 2>&1
  echo "ab $i $lib rc=$? t=$((SECONDS-t0))"; i=$((i+1))
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
