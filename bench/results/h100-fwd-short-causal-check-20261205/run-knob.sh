#!/usr/bin/env bash
# Same library both ways (build-lead/pp2/lib.xz, HEAD): A = FLASHATTN_SM90_HD128_BLOCKM=192
# (the 192-row tiles these calls took before the thirty-ninth session's rule),
# B = the default (128-row tiles at <= 1024 rows and keys). Alternated, three rounds;
# bench_short_calls.py kernel time, head dim 128 causal forward.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out" /tmp/new
[ -f /tmp/new/libflashattn.so.0.1.0 ] || xz -dc build-lead/pp2/lib.xz > /tmp/new/libflashattn.so.0.1.0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/new/libflashattn.so.0.1.0
for r in 1 2 3; do
  for v in A B; do
    if [ $v = A ]; then export FLASHATTN_SM90_HD128_BLOCKM=192; else unset FLASHATTN_SM90_HD128_BLOCKM; fi
    timeout 120 python3 bench/gpu/bench_short_calls.py "$out/knob-$v-r$r.csv" --pass fwd --hdims 128 \
      --seqlens 512,1024,2048 --causal 1 > /dev/null 2>&1
    echo "$v r$r rc=$?"; grep -E "^flashattn|^sdpa" "$out/knob-$v-r$r.csv" | cut -d, -f1,4,6-9
  done
done
