#!/usr/bin/env bash
# Forty-sixth session: the whole GPU test binary at 482dc21's code (build-lead/fin/gpu-tests.xz,
# sm_90a, every head dim), on whatever GPU the device gives (the log says which).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt; cat $L/gpu.txt
xz -dc build-lead/fin/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
t0=$SECONDS
timeout 420 /tmp/gt > $L/gpu-tests.log 2>&1
echo "rc=$? t=$((SECONDS-t0))"; tail -4 $L/gpu-tests.log; grep -E '^\[  FAILED' $L/gpu-tests.log | head
