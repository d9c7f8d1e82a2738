// Build from the repository root: g++ -O2 -std=c++17 -Isrc/cpu -march=sapphirerapids bench/results/cpu-fp32-amx-split-20261205/amx_loads.cpp -o /tmp/amx_loads && /tmp/amx_loads
// What a TILELOADD costs next to TDPBF16PS (one core, everything in L1): v0 the split GEMM's
// order (16 loads, 24 products per k-step of a 2 x 2 block), v1 the 24 products alone, v2 one
// load per product (the bf16 GEMM's 2 x 2 block, 4 loads per 4), v3 double-buffered operands
// (3 loads per 2 products), v4 2 loads per 2 products, v5 1 load per 2 products.
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
  std::vector<uint16_t> A(16 * 32 * 16, 0x3f80);
  const uint16_t* a = A.data();
  configure_tiles();
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  long n = 2000000;
#define DOT _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
#define LA(o) _tile_loadd(4, a + (o) * 512, 64); _tile_loadd(5, a + (o) * 512 + 512*3, 64);
#define LB(o) _tile_loadd(6, a + (o) * 512 + 512*6, 64); _tile_loadd(7, a + (o) * 512 + 512*9, 64);
  for (int v = 0; v < 6; ++v)
  for (int t = 0; t < 2; ++t) {
    auto t0 = std::chrono::steady_clock::now();
    if (v == 0) for (long i = 0; i < n; ++i) { LA(0) LB(1) DOT LB(2) DOT LB(0) DOT LA(1) DOT LA(2) DOT LA(1) LB(1) DOT }
    if (v == 1) for (long i = 0; i < n; ++i) { DOT DOT DOT DOT DOT DOT }
    if (v == 2) for (long i = 0; i < n; ++i) { LA(0) LB(0) DOT LA(1) LB(1) DOT LA(2) LB(2) DOT LA(0) LB(0) DOT LA(1) LB(1) DOT LA(2) LB(2) DOT }
    if (v == 3) for (long i = 0; i < n; ++i) for (int r = 0; r < 6; ++r) {
      _tile_loadd(2, a, 64); _tile_loadd(4, a + 512, 64); _tile_loadd(5, a + 1024, 64);
      _tile_dpbf16ps(0, 2, 4); _tile_dpbf16ps(1, 2, 5);
      _tile_loadd(3, a + 1536, 64); _tile_loadd(6, a + 2048, 64); _tile_loadd(7, a + 2560, 64);
      _tile_dpbf16ps(0, 3, 6); _tile_dpbf16ps(1, 3, 7); }
    if (v == 4) for (long i = 0; i < n; ++i) for (int r = 0; r < 12; ++r) {  // 2 loads / 2 TDP: a fixed B pair
      _tile_loadd(2, a, 64); _tile_loadd(3, a + 512, 64);
      _tile_dpbf16ps(0, 2, 4); _tile_dpbf16ps(1, 3, 5); }
    if (v == 5) for (long i = 0; i < n; ++i) for (int r = 0; r < 6; ++r) {  // 1 load per 4 TDP alternating regs
      _tile_loadd(6, a, 64); _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 5, 6);
      _tile_loadd(7, a+512, 64); _tile_dpbf16ps(2, 4, 7); _tile_dpbf16ps(3, 5, 7); }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("v%d %.0f GFLOP/s per core\n", v, 24.0 * n * 16 * 16 * 32 * 2 / s / 1e9);
  }
  release_tiles();
}
