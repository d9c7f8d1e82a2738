#!/usr/bin/env bash
# Third call: the fp8 rule with the lagged naive (naive_forward_fp8): every Fp8 case of the GPU
# binary, and run2.sh's CLI --check sweep again (head dims 96-256, four seeds). Same library
# kernels as run.sh; tests and CLI rebuilt with the new yardstick.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
xz -dc build-lead/new/tests.xz > /tmp/t && chmod +x /tmp/t
timeout 150 /tmp/t --gtest_filter='*Fp8*' > $L/fp8-tests.log 2>&1; echo "fp8 tests rc=$?"
grep -E "^\[  FAILED|^\[  PASSED|SKIPPED \]|tests ran" $L/fp8-tests.log | head -20
mkdir -p /tmp/lib && xz -dc build-lead/new/lib.xz > /tmp/lib/libflashattn.so.0
export LD_LIBRARY_PATH=/tmp/lib
for d in 96 112 128 192 208 256; do
  for seed in 1 2 3 4; do
    echo "== d $d seed $seed" >> $L/check.log
    build-lead/new/cli run --device cuda --dtype e4m3 --batch 2 --heads 4 --heads-kv 2 --seqlen-q 113 --seqlen-k 267 \
      --head-dim $d --check --check-heads 4 --repeat 1 --seed $seed 2>&1 | grep "^check  out" >> $L/check.log
  done
done
echo "check PASS $(grep -c PASS $L/check.log) FAIL $(grep -c FAIL $L/check.log)"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
