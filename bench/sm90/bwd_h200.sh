#!/usr/bin/env bash
# One device call for the Hopper backward (issue 6): SASS check, the GPU
# backward sweep (sm90 path for head_dim 128), compute-sanitizer on small
# head-dim-128 shapes, then flashattn vs cuDNN backward timings.
#   FLASHATTN_BUILD_DIR=build-sm90bwd bench/sm90/bwd_h200.sh [tests|bench|all]
# Logs go to $OUT (the device tool's return folder).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FLASHATTN_BUILD_DIR:-$root/build-sm90bwd}
out=${OUT:-/tmp/fa_out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLASHATTN_LIBRARY=$(ls "$build"/src/libflashattn.so.*.*.* | head -n 1)
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
T="$build/tests/flashattn_gpu_tests"
SAN='Small/Backward.*_b*_q113_k17_*d128*:Small/Backward.*_b*_q17_k113_*d128*causal*'

stage_tests() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "== SASS of the sm90 backward kernel: instruction mix =="
  cuobjdump -sass "$FLASHATTN_LIBRARY" 2>/dev/null |
    awk '/Function : /{f = ($0 ~ /sm9010bwd_kernel/)} f' > "$out/bwd-kernel.sass"
  grep -oE "(HGMMA|UTMALDG|UBLKCP|UBLKRED|SYNCS|BAR|LDL|STL)[A-Z0-9_.]*" "$out/bwd-kernel.sass" |
    sort | uniq -c | sort -rn | head -n 24
  # A hang (a lost barrier arrival) would eat the whole device call: a short
  # smoke run first, and nothing else when it fails.
  echo "== smoke: small head-dim-128 backward cases =="
  timeout 30 "$T" --gtest_brief=1 --gtest_filter='Small/Backward.*_q113_k113_*d128*' > "$out/bwd-smoke.log" 2>&1
  rc=$?
  echo "rc=$rc"
  grep -E "FAILED|Failure|Actual|^\[====|PASSED" "$out/bwd-smoke.log" | head -n 20
  if [ $rc -ne 0 ]; then echo "smoke failed: stopping"; exit 1; fi
  echo "== Backward sweep, default dispatch (sm90 backward for head_dim 128) =="
  timeout ${FA_T_SWEEP:-150} "$T" --gtest_brief=1 --gtest_filter='*Backward*:*Determinis*:-*Varlen*' > "$out/bwd-sweep.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|Actual|^\[====|PASSED|SKIPPED \]" "$out/bwd-sweep.log" | head -n 40
  for tool in ${FA_SANITIZERS:-racecheck synccheck memcheck}; do
    echo "== compute-sanitizer $tool =="
    timeout ${FA_T_SAN:-60} compute-sanitizer --tool $tool --print-limit 10 \
      "$T" --gtest_brief=1 --gtest_filter="$SAN" > "$out/bwd-san-$tool.log" 2>&1
    echo "rc=$?"
    tail -n 4 "$out/bwd-san-$tool.log"
  done
}

stage_bench() {
  timeout ${FA_T_BENCH:-200} python3 "$root/bench/gpu/bench_peers.py" "$out/h200-bwd-peers.csv" \
    --hdims 128 --passes bwd --impls flashattn,sdpa_cudnn "$@" 2>&1 | tail -n 40
}

stage_all() {
  stage_tests || exit 1
  stage_bench "$@"
}

stage=${1:-all}
shift || true
"stage_$stage" "$@" 2>&1 | tee "$out/bwd-$stage.log"
