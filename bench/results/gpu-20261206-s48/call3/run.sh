#!/usr/bin/env bash
# Forty-eighth session: issue 9's fp8 / bf16 ratio on an H200 only (three bench_fp8.py processes:
# flashattn fp8 / flashattn bf16 / SDPA cuDNN bf16, head dims 128 and 256, 512-16k, causal and not),
# at the forty-sixth session's fp8 kernels. Library: build-lead/s48b/lib.xz (08e349a; its CUDA
# kernels other than the varlen tail are those of dccbcdc). First, on any card: the varlen Python
# tests (test_varlen.py, with the CUDA graph over a static varlen buffer); the benchmark then only
# on an H200.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s48b/lib.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
(cd python/tests && timeout 150 python3 -m pytest -q test_varlen.py > $L/pytest-varlen.log 2>&1)
echo "pytest rc=$? t=$((SECONDS-t0))"; tail -2 $L/pytest-varlen.log
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H200*) ;; *) echo "not an H200"; cd $OUT && tar czf logs.tgz logs && rm -rf logs; exit 0 ;; esac
for r in 0 1 2; do
  timeout 150 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
done
grep -h ',16384,' $L/fp8-r*.csv | head -40
cd $OUT && tar czf logs.tgz logs && rm -rf logs
