#!/usr/bin/env bash
# Hopper backward, head dim 128: 80-row steps (FLASHATTN_SM90_BWD_TALL=1 unmasked, 2 masked too)
# against the 64-row kernel (=0). Smoke, backward sweeps under both settings, then CLI timings
# alternated per process, two rounds.
set -u
D=build-lead/m80
mkdir -p /tmp/w && xz -dc $D/lib.so.xz > /tmp/w/libflashattn.so.0 && ln -sf libflashattn.so.0 /tmp/w/libflashattn.so
xz -dc $D/tests.xz > /tmp/w/t && xz -dc $D/cli.xz > /tmp/w/flashattn && chmod +x /tmp/w/t /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
echo "== smoke (tall=2)"
FLASHATTN_SM90_BWD_TALL=2 timeout 40 /tmp/w/t --gtest_brief=1 --gtest_filter='Small/Backward.*_q113_k113_*d128*' > $OUT/smoke.log 2>&1
rc=$?; echo "rc=$rc"; grep -E "FAILED|Failure|^\[====|PASSED" $OUT/smoke.log | head -20
if [ $rc -ne 0 ]; then tail -40 $OUT/smoke.log; exit 1; fi
for tall in 1 2; do
  echo "== sweep tall=$tall"
  FLASHATTN_SM90_BWD_TALL=$tall timeout 170 /tmp/w/t --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*:*Edge*:-*Varlen*' > $OUT/sweep-tall$tall.log 2>&1
  echo "rc=$?"; grep -E "FAILED|^\[====|PASSED|SKIPPED \]" $OUT/sweep-tall$tall.log | head -30
done
echo "== CLI"
for r in 1 2; do
  for shape in "16 16384 1" "16 8192 2" "16 4096 4" "16 2048 8" "16 1024 16" "16 512 32" "32 4096 1"; do
    set -- $shape
    for c in "" "--causal"; do
      for tall in 0 1 2; do
        [ -z "$c" ] && [ $tall = 2 ] && continue
        out=$(FLASHATTN_SM90_BWD_TALL=$tall /tmp/w/flashattn run --device cuda --backward --heads $1 --seqlen-q $2 --batch $3 --head-dim 128 --dtype bf16 --repeat 30 $c 2>&1 | grep -E "^backward")
        echo "r$r tall=$tall h$1 s$2 b$3 $c :: $out"
      done
    done
  done
done
