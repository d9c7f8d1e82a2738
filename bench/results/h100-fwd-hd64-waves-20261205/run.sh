#!/usr/bin/env bash
# Head dim 64, unmasked forward, 512-2k tokens (the grid's shapes: 16k tokens, 32 heads):
# the default (192-row tiles above 128 rows) against FLASHATTN_SM90_HD64_BLOCKM=128,
# same library (build-lead/pp2/lib.xz), three processes each, alternated; bench_peers.py
# with cuDNN in every process. Question: does head dim 128's wave-count rule
# (tile_rules.hpp hd128_narrow_tiles_pay: 128 rows at 512 and 1k here, 192 at 2k) hold at 64?
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out" /tmp/new
[ -f /tmp/new/libflashattn.so.0.1.0 ] || xz -dc build-lead/pp2/lib.xz > /tmp/new/libflashattn.so.0.1.0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/new/libflashattn.so.0.1.0
for r in 1 2 3; do
  for v in default m128; do
    if [ $v = m128 ]; then export FLASHATTN_SM90_HD64_BLOCKM=128; else unset FLASHATTN_SM90_HD64_BLOCKM; fi
    timeout 150 python3 bench/gpu/bench_peers.py "$out/peers-$v-r$r.csv" --hdims 64 --passes fwd --causal 0 \
      --seqlens 512,1024,2048 --impls flashattn,sdpa_cudnn > /dev/null 2>&1
    echo "$v r$r rc=$?"; grep -E "^(flashattn|sdpa)" "$out/peers-$v-r$r.csv" | cut -d, -f1,4,8,9 | tr '\n' ' '; echo
  done
done
