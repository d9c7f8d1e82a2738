#!/usr/bin/env bash
# Short causal forward: which tile (128 / 192 query rows) and turn-taking setting is fastest in
# kernel time at head dims 64 and 128, 512-4k tokens? Library: 26c4e70 (build-lead/pp/old.so.xz),
# settings by the run-time knobs (sm90_forward.cu), each a process of its own, two rounds;
# bench_short_calls.py times flashattn and SDPA cuDNN in every process.
set -u
L=/tmp/l; mkdir -p $L/o; R=$OUT/r; mkdir -p $R
[ -f $L/o/libflashattn.so.0 ] || xz -dc build-lead/pp/old.so.xz > $L/o/libflashattn.so.0
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=$L/o/libflashattn.so.0
t0=$SECONDS
for r in 1 2; do
  for s in def m128 m192 m128pp0 m128pp1; do
    case $s in
      def) env="" ;;
      m128) env="FLASHATTN_SM90_HD128_BLOCKM=128 FLASHATTN_SM90_HD64_BLOCKM=128" ;;
      m192) env="FLASHATTN_SM90_HD128_BLOCKM=192 FLASHATTN_SM90_HD64_BLOCKM=192" ;;
      m128pp0) env="FLASHATTN_SM90_HD128_BLOCKM=128 FLASHATTN_SM90_HD64_BLOCKM=128 FLASHATTN_SM90_PINGPONG=0" ;;
      m128pp1) env="FLASHATTN_SM90_HD128_BLOCKM=128 FLASHATTN_SM90_HD64_BLOCKM=128 FLASHATTN_SM90_PINGPONG=1" ;;
    esac
    env $env timeout 100 python3 bench/gpu/bench_short_calls.py $R/$s-r$r.csv --pass fwd --hdims 64,128 \
      --seqlens 512,1024,2048,4096 --causal 1 > $R/$s-r$r.log 2>&1
    echo "r$r $s rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
