#!/usr/bin/env bash
# Fiftieth session, last call (little device time left): on an H200, two bench_fp8.py processes
# and the sm80 backward's order (run.sh's steps, shortened); on an H100, the sm80 backward's
# order at head dims 96 and 192 (gpu-sm80-bwd-order-20261206/run-hd96-192.sh).
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
*H200*) sed -e 's/for r in 0 1 2; do/for r in 0 1; do/' bench/results/h200-s50-20261206/run.sh > /tmp/r.sh; bash /tmp/r.sh ;;
*) bash bench/results/gpu-sm80-bwd-order-20261206/run-hd96-192.sh ;;
esac
