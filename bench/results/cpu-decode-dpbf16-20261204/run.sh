#!/usr/bin/env bash
# Alternated bench_decode.py runs: bf16 decode scores on VDPBF16PS (the avx512_bf16 path, the AMD default)
# against the same library forced to the AVX-512 path (bf16 widened to fp32, as before this change).
# usage: LIB=path/to/libflashattn.so OUT=dir PY=python-with-torch bench/results/cpu-decode-dpbf16-20261204/run.sh
set -e
cd "$(dirname "$0")/../../.."
: "${LIB:?path of the library}" "${OUT:?output folder}"
PY=${PY:-python3}
for r in 1 2 3; do
  for isa in avx512 avx512_bf16; do
    FLASHATTN_LIBRARY=$LIB FLASHATTN_CPU_ISA=$isa OMP_NUM_THREADS=2 PYTHONPATH=python:bench/cpu \
      $PY bench/cpu/bench_decode.py $OUT/dec-$isa-r$r.csv --dtypes fp32,bf16 > $OUT/dec-$isa-r$r.log 2>&1
  done
done
echo done > $OUT/DONE
