#!/usr/bin/env bash
# The grid of run.sh (this folder) (five bench_peers.py processes,
# two bench_fp8.py, HEAD's kernels) on an H200 only: exits at once on any other card.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
exec bash bench/results/h100-peers-20261205-head/run.sh
