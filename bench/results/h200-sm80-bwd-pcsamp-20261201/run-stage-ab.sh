#!/usr/bin/env bash
# sm80 backward on sm_90: dQ staged in shared memory, one bulk reduce-add per warp row (B) against e453e24 (A):
# GPU sweep with the sm80 path forced and with the default dispatch (sm90 kernels: the bulk helpers moved
# to common/ptx.cuh), then backward peers with FA2 in every process (2 rounds, alternated).
set -uo pipefail
mkdir -p build-h200/src build-h200/tests
for f in build-lead/c1/*.xz; do n=$(basename "$f" .xz); dst=${n//__//}; xz -dc "$f" > "build-h200/$dst"; chmod +x "build-h200/$dst"; done
(cd build-h200/src && ln -sf libflashattn.so.0.1.0 libflashattn.so.0 && ln -sf libflashattn.so.0 libflashattn.so)
xz -dc build-lead/ab/libA.so.xz > /tmp/libA.so
L=$OUT/logs; mkdir -p $L
export LD_LIBRARY_PATH=$PWD/build-h200/src FLASHATTN_LIBRARY=$PWD/build-h200/src/libflashattn.so.0.1.0 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
T=build-h200/tests/flashattn_gpu_tests
t0=$SECONDS
for r in 1 2; do
  order="A B"; [ $r = 2 ] && order="B A"
  for s in $order; do
    lib=$FLASHATTN_LIBRARY; [ $s = A ] && lib=/tmp/libA.so
    FLASHATTN_DISABLE_SM90=1 FLASHATTN_LIBRARY=$lib timeout 100 python3 bench/gpu/bench_peers.py $L/stage-r$r-$s.csv --passes bwd --hdims 64,128 --seqlens 1024,4096,16384 --impls flashattn,sdpa_flash > /dev/null 2>&1; echo "peers r$r $s rc=$? t=$((SECONDS-t0))"
  done
done
FLASHATTN_DISABLE_SM90=1 timeout 170 $T --gtest_brief=1 > $L/gpu-tests-sm80.log 2>&1; echo "gpu tests (sm80 forced) rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-tests-sm80.log | head -12
timeout 150 $T --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? t=$((SECONDS-t0))"
grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $L/gpu-tests.log | head -12
cd $OUT && tar czf logs.tgz logs && rm -rf logs
