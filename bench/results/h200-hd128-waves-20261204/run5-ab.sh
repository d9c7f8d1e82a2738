#!/usr/bin/env bash
# The wave-count tile rule for head dim 128 (fb46aa5): GPU tests, then old (40ab50c's CUDA code) against
# new libraries alternated: CLI medians on common shapes, and bench_peers' head-dim-128 forward grid.
set -u
W=/tmp/w; mkdir -p $W/old $W/new $OUT/logs
xz -dc build-lead/waves2/old.so.xz > $W/old/libflashattn.so.0
xz -dc build-lead/waves2/new.so.xz > $W/new/libflashattn.so.0
xz -dc build-lead/waves2/gpu_tests.xz > $W/gpu_tests && chmod +x $W/gpu_tests
cp build-lead/waves2/cli $W/flashattn && chmod +x $W/flashattn
( cd build-h200 2>/dev/null; timeout 300 $W/gpu_tests --gtest_brief=1 > $OUT/logs/gpu-tests.log 2>&1; echo "gpu tests rc=$?" )
tail -3 $OUT/logs/gpu-tests.log
grep -c "OK \]" $OUT/logs/gpu-tests.log
for r in 1 2; do
  for L in old new; do
    for shape in "32 1024 1" "32 2048 1" "32 4096 1" "16 512 32" "16 1024 16" "64 2048 1" "8 8192 1" "16 4096 1" "16 16384 1" "32 8192 1"; do
      set -- $shape
      o=$(LD_LIBRARY_PATH=$W/$L $W/flashattn run --device cuda --head-dim 128 --dtype bf16 --repeat 60 --heads $1 --seqlen-q $2 --batch $3 2>&1 | grep "^forward" | sed 's/  (min.*runs)//')
      echo "r$r $L heads $1 seqlen $2 batch $3 :: $o" | tee -a $OUT/logs/cli.log
    done
  done
done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for r in 1 2 3; do
  for L in old new; do
    FLASHATTN_LIBRARY=$W/$L/libflashattn.so.0 python3 bench/gpu/bench_peers.py $OUT/logs/grid-$L-r$r.csv --hdims 128 --passes fwd --causal 0 --impls flashattn,sdpa_cudnn > /dev/null 2>&1
    echo "grid r$r $L rc=$?"
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
