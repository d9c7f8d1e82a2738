#!/bin/bash
# alternated ISA rounds of bench_decode bf16
cd /work/main
for r in 1 2 3; do for isa in avx512_bf16 avx512 amx; do
  FLASHATTN_CPU_ISA=$isa OMP_NUM_THREADS=2 FLASHATTN_LIBRARY=$PWD/build-cpu/src/libflashattn.so PYTHONPATH=python:bench/cpu .venv/bin/python bench/cpu/bench_decode.py --dtypes bf16 /tmp/dec/r$r-$isa.csv > /dev/null 2>&1
  echo "r$r $isa $(grep streaming /tmp/dec/r$r-$isa.csv | grep -o 'median [0-9.]*') | $(grep '^flashattn' /tmp/dec/r$r-$isa.csv | cut -d, -f3,8 | tr '\n' ' ')"
done; done
