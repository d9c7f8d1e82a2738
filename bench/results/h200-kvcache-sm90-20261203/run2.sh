#!/usr/bin/env bash
# Split-KV in the Hopper forward (pieces of a query tile's key range, the
# sm80 combine kernel after): the whole GPU test binary, sanitizers on split
# KV-cache cases, chunked prefill with every chunk on the Hopper forward
# (FLASHATTN_SM90_KVCACHE_MIN_Q=1) beside SDPA, the plain forward of A
# (dd32713) and B (this) alternated, their padded head-dim-128 kernels'
# local-memory instructions, and the Python KV-cache / varlen tests.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/kvsm90
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 300 /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/gt --gtest_filter='*KvCache*cuda*split7*:*KvCache*cuda_f16_q64*split4*' --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_KVCACHE_MIN_Q=1 timeout 150 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm90split.csv --label flashattn_sm90 > $L/prefill-sm90split.log 2>&1; echo "prefill sm90 rc=$? t=$((SECONDS-t0))"
for x in A B B A; do
  n=$(ls $L/fwd-$x-*.csv 2>/dev/null | wc -l)
  FLASHATTN_LIBRARY=/tmp/$x.so timeout 60 python3 bench/gpu/bench_peers.py $L/fwd-$x-$n.csv --hdims 128 --seqlens 1024,8192 --passes fwd --impls flashattn > $L/fwd-$x-$n.log 2>&1; echo "fwd $x rc=$? t=$((SECONDS-t0))"
done
for x in A B; do
  cuobjdump -sass -fun '_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16Li128ELi192EEELb0ELi0EEEvNS2_10KernelArgsE' /tmp/$x.so > $L/sass-hd128-$x.txt 2>&1
  echo "sass $x: $(grep -c 'STL' $L/sass-hd128-$x.txt) STL, $(grep -c 'LDL' $L/sass-hd128-$x.txt) LDL, $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $L/sass-hd128-$x.txt) instructions"
done
FLASHATTN_LIBRARY=/tmp/B.so timeout 150 python3 -m pytest -q python/tests/test_kvcache_extras.py python/tests/test_varlen.py python/tests/test_torch.py -k "cuda or kvcache" -x > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
grep -h flashattn_sm90 $L/prefill-sm90split.csv | cut -d, -f1-10
for f in $L/fwd-*.csv; do echo $f; grep -v '^#' $f | tail -4; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
