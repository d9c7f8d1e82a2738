#!/usr/bin/env bash
# Deterministic backward: kv heads interleaved up to heads_kv (powers of two
# that need not divide it; the last group's CTAs past the last head leave).
# A = 921c3ac's kernels (largest power of two dividing heads_kv), B = this.
# Determinism / multi-tile / varlen GPU tests, memcheck + synccheck on the
# uneven case, then head dim 192 (10 kv heads) default vs deterministic, A/B.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/detil
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 240 /tmp/gt --gtest_filter='*Determinis*:*KvHeads*:*MultiTile*:*Varlen*:*_det*' --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -2 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
timeout 120 compute-sanitizer --tool memcheck /tmp/gt --gtest_filter='*DeterministicBackwardUnevenKvHeads/cuda_bf16' --gtest_brief=1 > $L/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1) $(grep -E 'PASSED|FAILED' $L/memcheck.log | tail -1) t=$((SECONDS-t0))"
timeout 100 compute-sanitizer --tool synccheck /tmp/gt --gtest_filter='*DeterministicBackwardUnevenKvHeads/cuda_f16' --gtest_brief=1 > $L/synccheck.log 2>&1; echo "synccheck rc=$? $(grep -E 'ERROR SUMMARY' $L/synccheck.log | tail -1) t=$((SECONDS-t0))"
for x in A B B A; do
  n=$(ls $L/det192-$x-*.csv 2>/dev/null | wc -l)
  FLASHATTN_LIBRARY=/tmp/$x.so FLASHATTN_COMMIT=$x timeout 100 python3 bench/gpu/bench_peers.py $L/det192-$x-$n.csv --hdims 192 --seqlens 512,1024,2048,4096 --passes bwd --impls flashattn,flashattn_det > $L/det192-$x-$n.log 2>&1; echo "det $x rc=$? t=$((SECONDS-t0))"
done
cat $L/det192-B-0.csv
cd $OUT && tar czf logs.tgz logs && rm -rf logs
