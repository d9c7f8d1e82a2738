// Does an fp32 FMA GEMM (the AVX-512 units) run under a split bf16 tile GEMM
// (the AMX unit) when the two are interleaved a few steps at a time? One
// core, the fp32 backward's shapes at head dim 128 (256-query x 128-key
// pairs): the tile job is dV^T += dO^T P (M 128, N 128 keys, K 256 queries,
// three pieces, six products); the FMA GEMM is dQ += dS K (256 x 128 over
// 128 keys, fp32, gemm.hpp's 4 x 64 micro-kernel on 32-deep slices).
// Prints TSC cycles (best of 30) for: tiles alone, FMA alone, interleaved.
// g++ -O2 -std=c++17 -march=sapphirerapids -I../../../src/cpu fma_under_tiles.cpp -o fu && taskset -c 1 ./fu
#define FA_ISA_NS amx
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels/amx_tiles.hpp"
#include "kernels/gemm.hpp"
using namespace flashattn::detail::cpu::amx;

int main(int argc, char** argv) {
  syscall(SYS_arch_prctl, 0x1023, 18);
  configure_tiles();
  const int per = argc > 1 ? atoi(argv[1]) : 2;  // FMA slices between tile steps (0: auto spread)
  const int64_t KS = argc > 2 ? atol(argv[2]) : 32;  // keys per FMA slice
  // Tile job operands (library layouts): A = dO^T planes (128 x 256 per piece,
  // row stride 256), B = P pairs (128 pair rows x 2*128, per piece), C 128 x 128.
  const int64_t M = 128, N = 128, K = 256;
  std::vector<uint16_t> A(3 * M * K + 64), B(3 * (K / 2) * 2 * N + 64);
  for (auto& x : A) x = 0x3f80 + (rand() & 0x7f);
  for (auto& x : B) x = 0x3f80 + (rand() & 0x7f);
  std::vector<float> C(M * N + 64, 0.f);
  // FMA GEMM operands: dS 256 x 128 (row stride 128), K rows 128 x 128, dQ 256 x 128.
  const int64_t FM = 256, FN = 128, FK = 128;
  std::vector<float> dS(FM * FK + 64), Kr(FK * FN + 64), dQ(FM * FN + 64, 0.f);
  for (auto& x : dS) x = (rand() & 0xff) / 256.f;
  for (auto& x : Kr) x = (rand() & 0xff) / 256.f;
  auto tiles_job = [&] { return SplitGemmJob(M, N, K, A.data(), K, M * K, B.data(), 2 * N, (K / 2) * 2 * N, C.data(), N, true); };
  // One FMA slice: 4 rows x 64 columns of dQ over KS keys.
  const int64_t slices = (FM / 4) * (FN / 64) * (FK / KS);
  auto fma_slice = [&](int64_t s) {
    const int64_t k0 = (s % (FK / KS)) * KS, cb = (s / (FK / KS)) % (FN / 64), rb = s / ((FK / KS) * (FN / 64));
    micro<4, 4, true, false, float>(KS, dS.data() + rb * 4 * FK + k0, FK, 1, Kr.data() + k0 * FN + cb * 64, FN,
                                    dQ.data() + rb * 4 * FN + cb * 64, FN, nullptr);
  };
  for (int w = 0; w < 3; ++w) { auto j = tiles_job(); j.finish(); for (int64_t s = 0; s < slices; ++s) fma_slice(s); }
  for (int round = 0; round < 3; ++round) {
    uint64_t ta = ~0ull, ts = ~0ull, tf = ~0ull, tb = ~0ull;
    for (int rep = 0; rep < 30; ++rep) {
      uint64_t t0 = __rdtsc();
      { auto j = tiles_job(); j.finish(); }
      uint64_t t1 = __rdtsc();
      { auto j = tiles_job(); while (!j.done()) j.step(); }
      uint64_t t2 = __rdtsc();
      for (int64_t s = 0; s < slices; ++s) fma_slice(s);
      uint64_t t3 = __rdtsc();
      {
        auto j = tiles_job();
        const int64_t steps = j.steps();
        int64_t s = 0, credit = 0;
        // Spread the FMA slices evenly over the tile steps (per == 0), or
        // `per` slices after each step until one side runs out.
        while (!j.done() || s < slices) {
          if (!j.done()) j.step();
          if (per == 0) {
            for (credit += slices; credit >= steps && s < slices; credit -= steps) fma_slice(s++);
            if (j.done()) while (s < slices) fma_slice(s++);
          } else {
            for (int q = 0; q < per && s < slices; ++q) fma_slice(s++);
          }
        }
      }
      uint64_t t4 = __rdtsc();
      ta = std::min(ta, t1 - t0); ts = std::min(ts, t2 - t1); tf = std::min(tf, t3 - t2); tb = std::min(tb, t4 - t3);
    }
    printf("KS %lld per %d: tiles (tile_gemm) %llu  tiles stepped %llu  fma %llu  interleaved %llu  (sum %llu, overlap %+.0f%% of the shorter; negative: slower than one after the other)\n",
           (long long)KS, per, (unsigned long long)ta, (unsigned long long)ts, (unsigned long long)tf, (unsigned long long)tb,
           (unsigned long long)(ts + tf), 100.0 * (double(ts) + double(tf) - double(tb)) / double(std::min(ts, tf)));
  }
  release_tiles();
  printf("%g %g\n", C[5], dQ[7]);
}
