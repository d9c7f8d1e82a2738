// The machine's ceilings for bench_cpu: an FMA loop (peak GFLOP/s) and a
// streaming read over 1 GiB (GB/s), each compiled for the widest vectors the
// CPU has. One translation unit per ISA (ceilings_avx512.cpp, ceilings_avx2.cpp,
// compiled with their own -m flags): -mavx512f on the whole benchmark had let
// AVX-512 reach a host without it (an illegal instruction on an AVX2-only
// EPYC). pick_ceilings() chooses at run time.
#pragma once

struct Ceilings {
  const char* isa;
  double (*fma_peak_gflops)();
  double (*read_bandwidth_gbs)();
};

Ceilings ceilings_avx512();
Ceilings ceilings_avx2();

inline Ceilings pick_ceilings() {
  return __builtin_cpu_supports("avx512f") ? ceilings_avx512() : ceilings_avx2();
}
