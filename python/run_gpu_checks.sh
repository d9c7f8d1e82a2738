#!/usr/bin/env bash
# The Python checks for a machine with a GPU and torch already installed (the
# H200 machine: no network, Python 3.12 + torch 2.11): pytest (CPU and CUDA),
# the per-call overhead benchmark, and the GPT example eager and compiled.
#   python/run_gpu_checks.sh BUILD_DIR [OUT_DIR]
# BUILD_DIR holds a CUDA build of libflashattn (src/libflashattn.so); logs go
# to OUT_DIR when given. Exits non-zero if any step fails (all steps run).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: run_gpu_checks.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-}
py=${FLASHATTN_PYTHON:-python3}
export FLASHATTN_LIBRARY="$build/src/libflashattn.so"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
[ -n "$out" ] && mkdir -p "$out"
rc=0
step() {  # step NAME CMD...
  local name=$1; shift
  echo "== $name: $*"
  if [ -n "$out" ]; then "$@" 2>&1 | tee "$out/$name.txt"; else "$@" 2>&1; fi
  local s=${PIPESTATUS[0]}
  [ "$s" -eq 0 ] || { echo "== $name FAILED (exit $s)"; rc=1; }
}
step pytest "$py" -m pytest python/tests -p no:cacheprovider -rs
step overhead_cuda "$py" python/benchmarks/call_overhead.py --device cuda
step overhead_cpu "$py" python/benchmarks/call_overhead.py --device cpu
step gpt_cuda "$py" python/examples/train_gpt_block.py --device cuda
step gpt_cuda_compile "$py" python/examples/train_gpt_block.py --device cuda --compile
step gpt_cpu "$py" python/examples/train_gpt_block.py --device cpu --steps 10
exit $rc
