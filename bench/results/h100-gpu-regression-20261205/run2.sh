#!/usr/bin/env bash
# Second call (run.sh's pytest ran past its 120 s and the CLI did not find
# libflashattn.so.0): the Python tests on CUDA with room, then the CLI checks.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/full
xz -dc $D/lib.xz > /tmp/libflashattn.so.0
xz -dc $D/cli.xz > /tmp/fa; chmod +x /tmp/fa
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libflashattn.so.0 LD_LIBRARY_PATH=/tmp
t0=$SECONDS
for a in "--dtype bf16 --causal --backward" "--dtype bf16 --head-dim 256 --backward" "--dtype bf16 --head-dim 64 --causal --backward" "--dtype e4m3" "--dtype bf16 --seqlen-q 1 --seqlen-k 8192 --heads 64 --heads-kv 8"; do
  echo "== $a" >> $L/cli-check.log
  timeout 40 /tmp/fa run --device cuda --seqlen-q 1030 --heads 8 --check $a --repeat 3 >> $L/cli-check.log 2>&1 || echo "cli rc=$? for $a" >> $L/cli-check.log
done
grep -E '^==|check  PASS|FAIL|rc=' $L/cli-check.log; echo "cli t=$((SECONDS-t0))"
timeout 480 python3 -m pytest -q -p no:cacheprovider python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
grep -E 'FAILED|Error' $L/pytest.log | head -10
