// Build from the repository root: g++ -O2 -std=c++17 -Isrc/cpu -march=sapphirerapids bench/results/cpu-fp32-amx-split-20261205/amx_tdp_peak.cpp -o /tmp/amx_tdp_peak && /tmp/amx_tdp_peak
// TDPBF16PS throughput: four independent accumulators, no loads.
#define FA_ISA_NS amx
#define FA_VW 16
#include <sys/syscall.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include "kernels/amx_tiles.hpp"
using namespace flashattn::detail::cpu::amx;
int main() {
  syscall(SYS_arch_prctl, 0x1023, 18);
  std::vector<uint16_t> A(16 * 32 * 4, 0x3f80);
  configure_tiles();
  _tile_loadd(4, A.data(), 64); _tile_loadd(5, A.data(), 64); _tile_loadd(6, A.data(), 64); _tile_loadd(7, A.data(), 64);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  long n = 20000000;
  for (int t = 0; t < 3; ++t) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) { _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("%.0f GFLOP/s per core (%.2f ns per TDP)\n", 4.0 * n * 16 * 16 * 32 * 2 / s / 1e9, s / (4.0 * n) * 1e9);
  }
  release_tiles();
}
