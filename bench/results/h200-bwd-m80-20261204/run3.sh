#!/usr/bin/env bash
# Hopper backward, head dim 128, 80-row steps with P^T for dS^T in fp16 pairs (bf16 inputs: dV
# issued after dS^T): backward sweep (default rule and every call on 80 rows), sanitizers on small
# shapes, the error against float64 (CLI --check), bench_peers 64- vs 80-row steps alternated.
set -u
D=build-lead/m80
mkdir -p /tmp/w && xz -dc $D/lib.so.xz > /tmp/w/libflashattn.so.0
xz -dc $D/tests.xz > /tmp/w/t && xz -dc $D/cli.xz > /tmp/w/flashattn && chmod +x /tmp/w/t /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
for tall in 1 2; do
  echo "== sweep tall=$tall"
  FLASHATTN_SM90_BWD_TALL=$tall timeout 150 /tmp/w/t --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*:*Edge*:-*Varlen*' > $OUT/sweep3-tall$tall.log 2>&1
  echo "rc=$?"; grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $OUT/sweep3-tall$tall.log | head -20
done
SAN='Small/Backward.*_b*_q113_k17_*d128*:Small/Backward.*_b*_q17_k113_*d128*:Small/Backward.*_q267_*d128*'
for tool in racecheck synccheck memcheck; do
  echo "== compute-sanitizer $tool (TALL=2)"
  FLASHATTN_SM90_BWD_TALL=2 timeout 60 compute-sanitizer --tool $tool --print-limit 10 /tmp/w/t --gtest_brief=1 --gtest_filter="$SAN" > $OUT/san3-$tool.log 2>&1
  echo "rc=$?"; grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san3-$tool.log | tail -3
done
echo "== --check"
for tall in 0 1; do
  for dt in bf16 fp16; do
  for shape in "--seqlen-q 1030 --seqlen-k 1030" "--seqlen-q 2000 --seqlen-k 3001 --heads-kv 4"; do
    echo "-- tall=$tall $dt $shape"
    FLASHATTN_SM90_BWD_TALL=$tall /tmp/w/flashattn run --device cuda --backward --check --heads 8 --head-dim 128 --dtype $dt --repeat 1 $shape 2>&1 | grep -E "check  d[qkv]"
  done
  done
done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/w/libflashattn.so.0
mkdir -p $OUT/peers
for r in 1 2; do
  for v in 1 0; do
    FLASHATTN_SM90_BWD_TALL=$v timeout 120 python3 bench/gpu/bench_peers.py $OUT/peers/tall$v-r$r.csv --hdims 128 --passes bwd --impls flashattn,sdpa_cudnn > $OUT/peers/tall$v-r$r.log 2>&1
    echo "r$r tall$v rc=$?"
  done
  (cd $OUT && tar czf peers3.tgz peers)
done
