#!/usr/bin/env bash
# One H200 run for issue 8 (the `run` tool runs it from the repository root with
# the CUDA build folder carried): the varlen / KV-cache GPU tests, compute-sanitizer
# memcheck on small shapes, the Python tests on CUDA tensors, the decode
# benchmark, and the padded sm80 forward sweep (FLASHATTN_DISABLE_SM90=1) to
# catch regressions in the shared kernel. Logs go to $OUT.
#   bash bench/gpu/h200_varlen.sh build-varlen-cuda <commit>
set -u
B=${1:-build-varlen-cuda}
COMMIT=${2:-unknown}
OUT=${OUT:-/tmp/out}
L=$PWD/$B/src/libflashattn.so.0.1.0
T=$B/tests/flashattn_gpu_tests
nvidia-smi -L
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "== $name: rc=$rc, $((SECONDS - t0)) s"; tail -4 "$OUT/$name.log"
  grep -E "^\[  FAILED|Failure|ERROR SUMMARY|FAILED|Error" "$OUT/$name.log" | head -12; }
step gpu_varlen 60 $T --gtest_filter='*Varlen*:*KvCache*'
step sanitizer 60 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Sweep/KvCache.*bf16_q4*page16*:Sweep/VarlenForward.*q0_31*:Sweep/KvCache.*split5:Sweep/KvCache.*q100*:Sweep/KvCache.*cache5000*:Sweep/VarlenForward.*q1_1_1*'
step pytest 60 env FLASHATTN_LIBRARY=$L PYTHONPATH=python python3 -m pytest python/tests/test_varlen.py -q -x
step decode 100 env FLASHATTN_COMMIT=$COMMIT FLASHATTN_LIBRARY=$L PYTHONPATH=python python3 bench/gpu/bench_decode.py $OUT/decode.csv
step sm80_fwd 50 env FLASHATTN_DISABLE_SM90=1 $T --gtest_filter='Small/Forward.*:Features/Forward.*'
