#!/usr/bin/env bash
# ABBA A/B (ran on an H100: the H200 did not come) of run-time tile settings at short causal forward calls, where the thirty-sixth
# session's two rounds (bench/sm90/NOTES.md, "Short causal forward: the tile and turn knobs")
# read 128-row tiles without pingpong faster than the default 192-row tiles at head dim 128
# (512-2k) and 192-row tiles faster than the default 128 at head dim 64 (512), inside that run's
# noise. The library and CLI of fde45ae (archs 90a, head dims 64 and 128: build-lead/pp), 6
# rounds, each setting first in every other round, 200 calls per process.
set -u
L=/tmp/l; mkdir -p $L; B=build-lead/pp
xz -dc $B/lib.xz > $L/libflashattn.so.0 && xz -dc $B/cli.xz > $L/flashattn && chmod +x $L/flashattn
export LD_LIBRARY_PATH=$L FLASHATTN_CLI=$L/flashattn
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/gpu.txt
t0=$SECONDS
bench/gpu/cli_abba.sh $OUT/hd128.csv 6 - FLASHATTN_SM90_HD128_BLOCKM=128,FLASHATTN_SM90_PINGPONG=0 \
  "--head-dim 128 --seqlen-q 512 --batch 32 --heads 16 --causal" \
  "--head-dim 128 --seqlen-q 1024 --batch 16 --heads 16 --causal" \
  "--head-dim 128 --seqlen-q 2048 --batch 8 --heads 16 --causal" > $OUT/hd128.txt 2>$OUT/hd128.err
echo "hd128 rc=$? t=$((SECONDS-t0))"; cat $OUT/hd128.txt
bench/gpu/cli_abba.sh $OUT/hd64.csv 6 - FLASHATTN_SM90_HD64_BLOCKM=192 \
  "--head-dim 64 --seqlen-q 512 --batch 32 --heads 32 --causal" > $OUT/hd64.txt 2>$OUT/hd64.err
echo "hd64 rc=$? t=$((SECONDS-t0))"; cat $OUT/hd64.txt
