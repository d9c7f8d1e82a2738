#!/usr/bin/env bash
# Split-KV with its own combine (split_combine.cuh: a warp per row) in place
# of the sm80 decode combine: the whole GPU test binary, sanitizers on split
# cases, then chunked prefill with the default dispatch (chunks of 64+ rows
# on the Hopper forward) beside SDPA, with every chunk on the Hopper forward,
# and on the sm80 path, two rounds; the plain forward of A (dd32713) and B.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/kvsm90
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 300 /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
for tool in memcheck racecheck synccheck initcheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='*KvCache*cuda*split7*:*KvCache*cuda_f16_q64*split*:*KvCache*cuda*q200*' --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
for r in 1 2; do
  FLASHATTN_LIBRARY=/tmp/B.so timeout 120 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-default-r$r.csv --label flashattn > $L/prefill-default-r$r.log 2>&1; echo "prefill default r$r rc=$? t=$((SECONDS-t0))"
  FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_KVCACHE_MIN_Q=1 timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm90-r$r.csv --label flashattn_sm90 --impls flashattn > $L/prefill-sm90-r$r.log 2>&1; echo "prefill sm90 r$r rc=$? t=$((SECONDS-t0))"
  FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_DISABLE_SM90=1 timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm80-r$r.csv --label flashattn_sm80 --impls flashattn > $L/prefill-sm80-r$r.log 2>&1; echo "prefill sm80 r$r rc=$? t=$((SECONDS-t0))"
done
for x in A B B A; do
  n=$(ls $L/fwd-$x-*.csv 2>/dev/null | wc -l)
  FLASHATTN_LIBRARY=/tmp/$x.so timeout 60 python3 bench/gpu/bench_peers.py $L/fwd-$x-$n.csv --hdims 64,128 --seqlens 1024,8192 --passes fwd --impls flashattn > $L/fwd-$x-$n.log 2>&1; echo "fwd $x rc=$? t=$((SECONDS-t0))"
done
FLASHATTN_LIBRARY=/tmp/B.so timeout 100 python3 -m pytest -q python/tests/test_kvcache_extras.py python/tests/test_varlen.py -x > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
for f in $L/prefill-*-r1.csv; do grep -v '^#' $f | cut -d, -f1-10; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
