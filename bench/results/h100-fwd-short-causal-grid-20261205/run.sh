#!/usr/bin/env bash
# The README grid's head-dim-128 causal forward cells at 512-2k with the
# thirty-ninth session's 128-row tiles (library of build-lead/pp2/lib.xz, HEAD's
# CUDA code): bench_peers.py, flashattn / SDPA FA2 / SDPA cuDNN in each process,
# three processes of the default alternated with three forcing the 192-row tiles
# (FLASHATTN_SM90_HD128_BLOCKM=192, what these calls ran before). Logs to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out" /tmp/new
[ -f /tmp/new/libflashattn.so.0.1.0 ] || xz -dc build-lead/pp2/lib.xz > /tmp/new/libflashattn.so.0.1.0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/new/libflashattn.so.0.1.0
for r in 1 2 3; do
  for v in default m192; do
    if [ $v = m192 ]; then export FLASHATTN_SM90_HD128_BLOCKM=192; else unset FLASHATTN_SM90_HD128_BLOCKM; fi
    timeout 150 python3 bench/gpu/bench_peers.py "$out/peers-$v-r$r.csv" --hdims 128 --passes fwd --causal 1 \
      --seqlens 512,1024,2048 > /dev/null 2>&1
    echo "$v r$r rc=$?"; grep -E "^(flashattn|sdpa)" "$out/peers-$v-r$r.csv" | cut -d, -f1,4,8,9 | tr '\n' ' '; echo
  done
done
