#!/usr/bin/env bash
# Hopper backward, head dim 128, 80-row steps: compute-sanitizer on small shapes (every call on
# 80 rows: FLASHATTN_SM90_BWD_TALL=2), the error against float64 (CLI --check, 64 vs 80 rows),
# then bench_peers (flashattn vs cuDNN, head dim 128 backward grid): the kept library A with the
# 80-row rule (TALL=1) and with 64-row steps (TALL=0), and library B (LSE loaded early on the
# 80-row steps), alternated, two rounds.
set -u
D=build-lead/m80
mkdir -p /tmp/w /tmp/b && xz -dc $D/lib.so.xz > /tmp/w/libflashattn.so.0 && xz -dc $D/libB.so.xz > /tmp/b/libflashattn.so.0
xz -dc $D/tests.xz > /tmp/w/t && xz -dc $D/cli.xz > /tmp/w/flashattn && chmod +x /tmp/w/t /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
SAN='Small/Backward.*_b*_q113_k17_*d128*:Small/Backward.*_b*_q17_k113_*d128*:Small/Backward.*_q267_*d128*'
for tool in racecheck synccheck memcheck; do
  echo "== compute-sanitizer $tool (TALL=2)"
  FLASHATTN_SM90_BWD_TALL=2 timeout 60 compute-sanitizer --tool $tool --print-limit 10 /tmp/w/t --gtest_brief=1 --gtest_filter="$SAN" > $OUT/san-$tool.log 2>&1
  echo "rc=$?"; grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK" $OUT/san-$tool.log | tail -4
done
echo "== --check"
for tall in 0 1; do
  for shape in "--seqlen-q 1030 --seqlen-k 1030" "--seqlen-q 4096 --seqlen-k 4096" "--seqlen-q 2000 --seqlen-k 3001 --heads-kv 4"; do
    echo "-- tall=$tall $shape"
    FLASHATTN_SM90_BWD_TALL=$tall /tmp/w/flashattn run --device cuda --backward --check --heads 8 --head-dim 128 --dtype bf16 --repeat 1 $shape 2>&1 | grep -iE "d[qkv]|out|check|rule|err" | head -12
  done
done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p $OUT/peers
for r in 1 2; do
  for v in A1 A0 B1; do
    lib=/tmp/w/libflashattn.so.0; [ $v = B1 ] && lib=/tmp/b/libflashattn.so.0
    FLASHATTN_LIBRARY=$lib FLASHATTN_SM90_BWD_TALL=${v:1:1} timeout 150 python3 bench/gpu/bench_peers.py $OUT/peers/$v-r$r.csv --hdims 128 --passes bwd --impls flashattn,sdpa_cudnn > $OUT/peers/$v-r$r.log 2>&1
    echo "r$r $v rc=$?"
  done
  (cd $OUT && tar czf peers.tgz peers)
done
