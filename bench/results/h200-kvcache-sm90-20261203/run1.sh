#!/usr/bin/env bash
# KV cache (contiguous) on the Hopper forward: GPU tests (KV cache, varlen,
# forward sweeps), sanitizers on the new path, then chunked prefill timed on
# the sm80 path (FLASHATTN_DISABLE_SM90=1) and on the Hopper forward
# (FLASHATTN_SM90_KVCACHE_MIN_Q=1), with SDPA's FA2 / cuDNN in the first
# process; and the plain / varlen forward of A (dd32713's kernels) against B
# (this change) to check that the per-sequence decode left them alone.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/kvsm90
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 200 /tmp/gt --gtest_filter='*KvCache*:*Varlen*:*HeadDimV*' --gtest_brief=1 > $L/gpu-tests-kv.log 2>&1; echo "gpu tests kv rc=$? $(tail -2 $L/gpu-tests-kv.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-kv.log | head -20
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='*KvCache*cuda*q200*:*KvCache*cuda*q65*:*KvCache*cuda*q70*' --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_KVCACHE_MIN_Q=1 timeout 150 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm90.csv --label flashattn_sm90 > $L/prefill-sm90.log 2>&1; echo "prefill sm90 rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_DISABLE_SM90=1 timeout 100 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm80.csv --label flashattn_sm80 --impls flashattn > $L/prefill-sm80.log 2>&1; echo "prefill sm80 rc=$? t=$((SECONDS-t0))"
for x in A B; do
  FLASHATTN_LIBRARY=/tmp/$x.so timeout 60 python3 bench/gpu/bench_peers.py $L/fwd-$x.csv --hdims 128 --seqlens 1024,8192 --passes fwd --impls flashattn > $L/fwd-$x.log 2>&1; echo "fwd $x rc=$? t=$((SECONDS-t0))"
done
cat $L/prefill-sm90.csv $L/prefill-sm80.csv; tail -5 $L/fwd-A.csv $L/fwd-B.csv
cd $OUT && tar czf logs.tgz logs && rm -rf logs
