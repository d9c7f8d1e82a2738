#!/usr/bin/env bash
# ABBA A/B (ran on an H100: the H200 did not come) of the single-warpgroup forward tile (bench/sm90/NOTES.md, "The single-warpgroup
# tile"): A = default tiles, B = FLASHATTN_SM90_HD{64,128}_BLOCKM=64, by the CLI (fde45ae's
# library and CLI, archs 90a, head dims 64 and 128: build-lead/pp/lib.xz, cli.xz), 10 rounds,
# each setting first in every other round, 200 calls per process. Short causal shapes (where the
# first run read the tile 8-11% faster) and two unmasked ones (where it read slower).
set -u
L=/tmp/l; mkdir -p $L; B=build-lead/pp
xz -dc $B/lib.xz > $L/libflashattn.so.0 && xz -dc $B/cli.xz > $L/flashattn && chmod +x $L/flashattn
export LD_LIBRARY_PATH=$L FLASHATTN_CLI=$L/flashattn
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
$L/flashattn run --device cuda --dtype bf16 --head-dim 128 --seqlen-q 512 --batch 32 --heads 16 --causal --repeat 5 > $OUT/smoke.txt 2>&1
t0=$SECONDS
bench/gpu/cli_abba.sh $OUT/abba.csv 10 - FLASHATTN_SM90_HD64_BLOCKM=64,FLASHATTN_SM90_HD128_BLOCKM=64 \
  "--head-dim 64 --seqlen-q 512 --batch 32 --heads 32 --causal" \
  "--head-dim 64 --seqlen-q 1024 --batch 16 --heads 32 --causal" \
  "--head-dim 128 --seqlen-q 512 --batch 32 --heads 16 --causal" \
  "--head-dim 128 --seqlen-q 1024 --batch 16 --heads 16 --causal" \
  "--head-dim 64 --seqlen-q 1024 --batch 16 --heads 32" \
  "--head-dim 128 --seqlen-q 1024 --batch 16 --heads 16" > $OUT/abba.txt 2>$OUT/abba.err
echo "abba rc=$? t=$((SECONDS-t0))"; cat $OUT/abba.txt
