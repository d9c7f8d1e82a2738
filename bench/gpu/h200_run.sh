#!/usr/bin/env bash
# What the lead runs on the H200 (device tool), in one call per stage, with a
# CUDA build folder carried over (default build-h200, configured with
# -DFLASHATTN_CUDA=ON). Logs go to $OUT (the device tool's return folder).
#
#   bench/gpu/h200_run.sh tests   GPU test sweep (Hopper + forced-sm80 forward),
#                                 compute-sanitizer memcheck/racecheck/synccheck/initcheck
#   bench/gpu/h200_run.sh python  pytest with CUDA tensors, GPT-block example
#   bench/gpu/h200_run.sh bench   flashattn vs torch SDPA flash/cuDNN, DESIGN.md grid
#   bench/gpu/h200_run.sh sanitize | final   (sanitizers alone | all, time-boxed order)
#   bench/gpu/h200_run.sh release            (sweep, backward vs peers, pytest, varlen, decode call cost)
#   bench/gpu/h200_run.sh sanitize_all  all four sanitizers over every kernel family
#                                 (varlen, KV cache, split-KV, sm90 bwd, ring, d192, ...)
#                                 plus an ncu check that every kernel was launched
#   bench/gpu/h200_run.sh varlen_bench  varlen vs padded prefill, same kernel (issue 8)
#   bench/gpu/h200_run.sh call_overhead per-call time of batch-1 decode, eager and
#                                 CUDA-graph replay, vs torch SDPA (issue 8)
#   bench/gpu/h200_run.sh ring_san      the ring's GPU tests under memcheck and initcheck
#   bench/gpu/h200_run.sh fp8           the fp8 (e4m3) forward (issue 9): its GPU tests, four
#                                 sanitizers on small shapes, pytest test_fp8.py,
#                                 bench_fp8.py (fp8 vs bf16 vs cuDNN, error vs bf16)
#   bench/gpu/h200_run.sh sm90_bwd      the Hopper backward's head dims (64, 128, 256): their
#                                 GPU tests, four sanitizers on small shapes, the
#                                 backward against the peers (issue 6)
#   bench/gpu/h200_run.sh score_mod     softcap / ALiBi on the Hopper kernels (issue 9): their
#                                 GPU tests, four sanitizers, pytest, bench_softcap.py
#                                 (Hopper vs the sm80 path) and bench_window.py
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FLASHATTN_BUILD_DIR:-$root/build-h200}
out=${OUT:-/tmp/fa_out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLASHATTN_LIBRARY="$build/src/libflashattn.so.0.1.0"  # the file, not a symlink
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
T="$build/tests/flashattn_gpu_tests"
# Small shapes for the sanitizers: odd lengths, Sq != Sk both ways, GQA, causal.
SAN_FILTER='Small/*bf16_b*_q113_k17_*d64*:Small/*_f16_b*_q17_k113_*d128*:Small/*bf16_b*_q113_k113_*d256*'
# ... plus the deterministic backward (its separate dQ kernel) on small shapes.
SAN_FILTER="$SAN_FILTER:Edge/EdgeShapes.DeterministicBackwardSmall/*"

stage_tests() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "== GPU sweep, default dispatch (sm90a forward where it applies) =="
  timeout ${FA_T_SWEEP:-280} "$T" --gtest_brief=1 > "$out/gpu-sweep.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/gpu-sweep.log" | head -n 40
  echo "== GPU sweep with FLASHATTN_DISABLE_SM90=1 (sm80 forward), Small + Features =="
  FLASHATTN_DISABLE_SM90=1 timeout ${FA_T_SM80:-120} "$T" --gtest_brief=1 --gtest_filter='Small/*:Features/*' > "$out/gpu-sweep-sm80.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/gpu-sweep-sm80.log" | head -n 20
  stage_sanitize
}

# The sanitizers alone (also the last step of `tests`), so a time-boxed run can
# put them after the benchmark.
stage_sanitize() {
  # initcheck: device memory read before it is written (workspace, padding).
  for tool in ${FA_SANITIZERS:-memcheck racecheck synccheck initcheck}; do
    for sm90 in 0 1; do
      echo "== compute-sanitizer $tool (FLASHATTN_DISABLE_SM90=$sm90) =="
      FLASHATTN_DISABLE_SM90=$sm90 timeout ${FA_T_SAN:-60} compute-sanitizer --tool $tool --print-limit 20 \
        "$T" --gtest_brief=1 --gtest_filter="$SAN_FILTER" 2>&1 | tail -n 8
    done
  done
}

# Every kernel family under memcheck/racecheck/synccheck/initcheck, and the
# kernel-coverage proof (bench/gpu/h200_sanitize_all.sh; ~4-7 min).
# The four sanitizers (or $FA_SANITIZERS) over the GPU tests matching a
# filter; logs san-TAG-TOOL.log. Args: tag, words for the headings, filter.
sanitize_filter() {
  for tool in ${FA_SANITIZERS:-memcheck racecheck synccheck initcheck}; do
    echo "== compute-sanitizer $tool, $2 =="
    timeout ${FA_T_SAN:-90} compute-sanitizer --tool $tool --print-limit 20 "$T" --gtest_brief=1 \
      --gtest_filter="$3" > "$out/san-$1-$tool.log" 2>&1
    tail -n 6 "$out/san-$1-$tool.log"
  done
}

stage_sanitize_all() {
  OUT="$out" FLASHATTN_BUILD_DIR="$build" bash "$root/bench/gpu/h200_sanitize_all.sh"
  echo "rc=$?"
}

# Varlen (packed, cu_seqlens) vs padded prefill of the same total tokens (issue 8).
stage_varlen_bench() {
  timeout ${FA_T_VARLEN:-300} python3 "$root/bench/gpu/bench_varlen.py" "$out/h200-varlen-bench.csv" "$@" 2>&1 | tail -n 60
}

# Host cost per flash_attn_with_kvcache call: CPU front end, batch-1 decode at
# 1k/8k eager and captured in a CUDA graph, torch SDPA (issue 8).
stage_call_overhead() {
  timeout ${FA_T_OVERHEAD:-180} python3 "$root/bench/gpu/bench_call_overhead.py" "$out/h200-call-overhead.csv" "$@" 2>&1 | tail -n 30
}

stage_python() {
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
  timeout 300 python3 -m pytest -q -x "$root/python/tests" 2>&1 | tail -n 30
  echo "rc=$?"
  timeout 120 python3 "$root/python/examples/train_gpt_block.py" --device cuda 2>&1 | tail -n 20
}

stage_bench() {
  timeout ${FA_T_BENCH:-500} python3 "$root/bench/gpu/bench_peers.py" "$out/h200-peers.csv" "$@" 2>&1 | tail -n 120
}

stage_all() {
  stage_tests
  stage_bench "$@"
}

# Everything in the order that matters when the device time runs out: the
# sweeps, the ring's GPU tests, the benchmark, the sanitizers, then pytest.
stage_final() {
  FA_SANITIZERS=" " stage_tests
  echo "== ring attention GPU tests =="
  timeout ${FA_T_RING:-60} "$build/tests/flashattn_ring_gpu_tests" --gtest_brief=1 2>&1 | tail -n 6
  stage_bench "$@"
  stage_sanitize
  stage_python
}

# A session's closing run, in the order that matters when device time runs
# out, each part time-boxed: the GPU sweep (default dispatch), the backward
# against the peers at every head dim plus the deterministic backward at
# head_dim 128, pytest on CUDA tensors, varlen-vs-padded prefill, the decode
# call cost. The sanitizers (sanitize_all) take a call of their own.
stage_release() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  # The deterministic backward waits on other CTAs: its tests run apart, with
  # a short time box, so that a hang there cannot eat the sweep.
  local det='*Determinis*:*DeterministicBackward*'
  echo "== GPU sweep, default dispatch (deterministic tests apart) =="
  timeout ${FA_T_SWEEP:-200} "$T" --gtest_brief=1 --gtest_filter="-$det" > "$out/gpu-sweep.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/gpu-sweep.log" | head -n 40
  timeout 60 "$T" --gtest_brief=1 --gtest_filter="$det" > "$out/gpu-sweep-det.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|differs|^\[====|PASSED|SKIPPED \]" "$out/gpu-sweep-det.log" | head -n 20
  echo "== ALiBi / dropout cost beside the plain sm80 kernels =="
  FA_VARIANTS_TIMING=1 timeout 60 "$T" --gtest_filter='CudaVariants.TimingReport' 2>&1 |
    grep -vE "^\[ +(RUN|OK) +\]|^$" | tail -n 30
  echo "== backward against the peers (every head dim), then the deterministic backward =="
  timeout ${FA_T_BENCH:-240} python3 "$root/bench/gpu/bench_peers.py" "$out/h200-peers-bwd.csv" \
    --passes bwd 2>&1 | tail -n 80
  timeout 90 python3 "$root/bench/gpu/bench_peers.py" "$out/h200-det.csv" --passes bwd \
    --hdims 128 --impls flashattn_det 2>&1 | grep -v "^#" | tail -n 14
  echo "== pytest on CUDA tensors =="
  timeout ${FA_T_PYTEST:-180} python3 -m pytest -q -x "$root/python/tests" 2>&1 | tail -n 15
  echo "== varlen vs padded prefill =="
  FA_T_VARLEN=${FA_T_VARLEN:-150} stage_varlen_bench
  echo "== decode call cost =="
  FA_T_OVERHEAD=${FA_T_OVERHEAD:-90} stage_call_overhead
}

# The Hopper backward alone (while it is being worked on): every backward
# test at its head dims (FA_BWD_HDIMS, default 64 128 256; the deterministic
# ones apart, time-boxed), memcheck / racecheck / synccheck / initcheck on
# small shapes of each, then the backward against the peers at those head dims.
stage_sm90_bwd() {
  local hdims=${FA_BWD_HDIMS:-64 128 256} f='Edge/*:Sweep/Determinism*' small='' h
  local det='*Determinis*:*DeterministicBackward*'
  for h in $hdims; do
    f="$f:*Backward*d$h*"
    small="$small:Small/Backward*cuda*q113_k17_*d$h*:Small/Backward*cuda*q17_k113_*d$h*"
  done
  small="${small#:}:Edge/EdgeShapes.DeterministicBackward*:Edge/EdgeShapes.BackwardHeadDim256*"
  echo "== backward tests, head dims $hdims =="
  timeout ${FA_T_SWEEP:-150} "$T" --gtest_brief=1 --gtest_filter="$f:-$det" > "$out/gpu-bwd.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/gpu-bwd.log" | head -n 30
  timeout 60 "$T" --gtest_brief=1 --gtest_filter="$det" > "$out/gpu-bwd-det.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|differs|^\[====|PASSED|SKIPPED \]" "$out/gpu-bwd-det.log" | head -n 20
  sanitize_filter bwd "sm90 backward small shapes" "$small"
  echo "== backward against the peers, head dims $hdims =="
  timeout ${FA_T_BENCH:-200} python3 "$root/bench/gpu/bench_peers.py" "$out/h200-peers-bwd.csv" \
    --passes bwd --hdims "$(echo $hdims | tr ' ' ,)" 2>&1 | tail -n 40
}

# The ring's GPU tests under memcheck (every thread binds its context before
# the TMA encode: sm90/tma_desc.cu) and initcheck with and without the sm90
# forward (whether the partial outputs its TMA stores wrote read as
# uninitialised to the merge).
stage_ring_san() {
  local R="$build/tests/flashattn_ring_gpu_tests"
  local filter='Sim/Ring.*_bf16_*:Sim/Ring.*_f16_*:RingMerge.*:RingArgs.*'
  for run in "memcheck 0" "initcheck 1" "initcheck 0"; do
    set -- $run
    echo "== compute-sanitizer $1, ring (FLASHATTN_DISABLE_SM90=$2) =="
    FLASHATTN_DISABLE_SM90=$2 timeout 120 compute-sanitizer --tool $1 --print-limit 5 "$R" \
      --gtest_brief=1 --gtest_filter="$filter" > "$out/ring-$1-$2.log" 2>&1
    echo "rc=$?"
    grep -E "ERROR SUMMARY|^\[  PASSED|FAILED" "$out/ring-$1-$2.log" | head -n 5
    grep -m 3 -E "Invalid|Uninitialized|Host Frame" "$out/ring-$1-$2.log"
  done
}

stage_fp8() {
  echo "== fp8 GPU tests =="
  timeout ${FA_T_SWEEP:-200} "$T" --gtest_brief=1 --gtest_filter='*Fp8*' > "$out/fp8-tests.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/fp8-tests.log" | head -n 40
  local small='Sweep/Fp8Forward.*q113_k267*:Sweep/Fp8Forward.*q267_k113*:Devices/Fp8Invalid.*'
  sanitize_filter fp8 "fp8 small shapes" "$small"
  echo "== pytest test_fp8.py =="
  timeout 200 python3 -m pytest -q -p no:warnings "$root/python/tests/test_fp8.py" 2>&1 | tail -n 15
  echo "== fp8 vs bf16 vs cuDNN =="
  timeout ${FA_T_BENCH:-200} python3 "$root/bench/gpu/bench_fp8.py" "$out/h200-fp8.csv" 2>&1 | tail -n 60
}

stage_score_mod() {
  echo "== softcap / ALiBi GPU tests =="
  local f='Features/Forward.*cap*:Features/Backward.*cap*:Sweep/Varlen*.*cap*:Sweep/Determinism.*cap*:CudaVariants.Alibi'
  timeout ${FA_T_SWEEP:-200} "$T" --gtest_brief=1 --gtest_filter="$f" > "$out/score-mod-tests.log" 2>&1
  echo "rc=$?"
  grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/score-mod-tests.log" | head -n 40
  sanitize_filter score_mod "softcap / ALiBi cases" "$f"
  echo "== pytest -k 'softcap or alibi' =="
  timeout 200 python3 -m pytest -q -p no:warnings "$root/python/tests" -k "softcap or alibi" 2>&1 | tail -n 5
  echo "== softcap / ALiBi, Hopper vs sm80 =="
  timeout ${FA_T_BENCH:-300} python3 "$root/bench/gpu/bench_softcap.py" "$out/h200-softcap-alibi.csv" 2>&1 | tail -n 30
  echo "== sliding-window cost =="
  timeout 150 python3 "$root/bench/gpu/bench_window.py" "$out/h200-window.csv" 2>&1 | tail -n 20
}

stage=${1:-tests}
shift || true
"stage_$stage" "$@" 2>&1 | tee "$out/h200-$stage.log"
