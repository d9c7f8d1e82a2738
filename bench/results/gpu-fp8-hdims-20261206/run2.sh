#!/usr/bin/env bash
# Second call: the CLI's --check (fp64 reference, the rule's naive error and tolerance per
# (batch, kv head)) for fp8 at head dims 96 / 112 / 128 / 192 / 208 / 256 on the shape whose
# d112 / d192 test cases failed in run.sh (batch 2, 113 x 267, 4 / 2 heads, non-causal), four
# seeds each, and causal 1030 x 1030 for comparison. Library and CLI: build-lead/new.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
mkdir -p /tmp/lib && xz -dc build-lead/new/lib.xz > /tmp/lib/libflashattn.so.0
export LD_LIBRARY_PATH=/tmp/lib
for d in 96 112 128 192 208 256; do
  for seed in 1 2 3 4; do
    echo "== d $d seed $seed" >> $L/check.log
    build-lead/new/cli run --device cuda --dtype e4m3 --batch 2 --heads 4 --heads-kv 2 --seqlen-q 113 --seqlen-k 267 \
      --head-dim $d --check --check-heads 4 --repeat 1 --seed $seed 2>&1 | grep "^check  out" >> $L/check.log
  done
  echo "== d $d causal 1030" >> $L/check.log
  build-lead/new/cli run --device cuda --dtype e4m3 --batch 1 --heads 2 --seqlen-q 1030 --head-dim $d --causal \
    --check --check-heads 2 --repeat 1 2>&1 | grep "^check  out" >> $L/check.log
done
grep -c PASS $L/check.log; grep -c FAIL $L/check.log
cd $OUT && tar czf logs.tgz logs && rm -rf logs
