#!/usr/bin/env bash
# 80-row backward steps, final form (key-only mask, fp16 P^T for dS^T, dV issued early, descriptors
# advanced on their low word): head-dim-128 backward tests with every unmasked call on 80 rows
# (TALL=2) and with the default rule, racecheck on small cases, --check errors, CLI A/B 64 / 80 rows.
set -u
D=build-lead/m80
mkdir -p /tmp/w && xz -dc $D/lib.so.xz > /tmp/w/libflashattn.so.0
xz -dc $D/tests.xz > /tmp/w/t && xz -dc $D/cli.xz > /tmp/w/flashattn && chmod +x /tmp/w/t /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
echo "== smoke"
FLASHATTN_SM90_BWD_TALL=2 timeout 20 /tmp/w/t --gtest_brief=1 --gtest_filter='Small/Backward.*_q113_k113_*d128*' > $OUT/smoke4.log 2>&1
rc=$?; echo "rc=$rc"; grep -E "FAILED|^\[====|PASSED" $OUT/smoke4.log | head; [ $rc -ne 0 ] && exit 1
for tall in 2 1; do
  echo "== d128 backward tests tall=$tall"
  FLASHATTN_SM90_BWD_TALL=$tall timeout 60 /tmp/w/t --gtest_brief=1 --gtest_filter='*Backward*d128*:*Edge*Backward*:-*Varlen*' > $OUT/sweep4-tall$tall.log 2>&1
  echo "rc=$?"; grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $OUT/sweep4-tall$tall.log | head -12
done
echo "== racecheck tall=2"
FLASHATTN_SM90_BWD_TALL=2 timeout 30 compute-sanitizer --tool racecheck --print-limit 5 /tmp/w/t --gtest_brief=1 --gtest_filter='Small/Backward.*_b*_q113_k17_*d128*:Small/Backward.*_q267_*d128*' > $OUT/san4-racecheck.log 2>&1
echo "rc=$?"; grep -E "PASSED|FAILED|SUMMARY" $OUT/san4-racecheck.log | tail -3
echo "== check"
for tall in 0 1; do for dt in bf16 fp16; do
  echo "-- tall=$tall $dt"
  FLASHATTN_SM90_BWD_TALL=$tall /tmp/w/flashattn run --device cuda --backward --check --heads 8 --head-dim 128 --dtype $dt --repeat 1 --seqlen-q 1030 --seqlen-k 1030 2>&1 | grep -E "check  d[qkv]"
done; done
echo "== CLI"
for r in 1 2; do
  for shape in "16 16384 1" "16 8192 2" "16 4096 4" "16 2048 8"; do
    set -- $shape
    for tall in 0 1; do
      out=$(FLASHATTN_SM90_BWD_TALL=$tall timeout 20 /tmp/w/flashattn run --device cuda --backward --heads $1 --seqlen-q $2 --batch $3 --head-dim 128 --dtype bf16 --repeat 20 2>&1 | grep -E "^backward")
      echo "r$r tall=$tall h$1 s$2 b$3 :: $out"
    done
  done
done
