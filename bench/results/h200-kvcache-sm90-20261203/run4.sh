#!/usr/bin/env bash
# Query sequences of at most 128 rows on 128-row tiles at head dims 64 and
# 128 (KV-cache chunks of 64-128 tokens): forward / KV-cache / varlen GPU
# tests, chunked prefill with the default dispatch beside SDPA (two rounds),
# and the plain forward of A (dd32713) and B (this) alternated three times.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/kvsm90
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 200 /tmp/gt --gtest_filter='*Forward*:*KvCache*:*Varlen*:*Edge*' --gtest_brief=1 > $L/gpu-tests-fwd.log 2>&1; echo "gpu tests fwd rc=$? $(tail -3 $L/gpu-tests-fwd.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-fwd.log | head -20
timeout 60 compute-sanitizer --tool racecheck /tmp/gt --gtest_filter='*KvCache*cuda*q64*:*KvCache*cuda*q100*' --gtest_brief=1 > $L/racecheck.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck.log | tail -1) $(grep -E 'PASSED|FAILED' $L/racecheck.log | tail -1) t=$((SECONDS-t0))"
for r in 1 2; do
  FLASHATTN_LIBRARY=/tmp/B.so timeout 120 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-default-r$r.csv --label flashattn > $L/prefill-default-r$r.log 2>&1; echo "prefill default r$r rc=$? t=$((SECONDS-t0))"
done
for x in A B A B A B; do
  n=$(ls $L/fwd-$x-*.csv 2>/dev/null | wc -l)
  FLASHATTN_LIBRARY=/tmp/$x.so timeout 60 python3 bench/gpu/bench_peers.py $L/fwd-$x-$n.csv --hdims 64,128 --seqlens 1024,8192 --passes fwd --impls flashattn > $L/fwd-$x-$n.log 2>&1; echo "fwd $x rc=$? t=$((SECONDS-t0))"
done
for f in $L/prefill-default-r1.csv; do grep -v '^#' $f | cut -d, -f1-10; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
