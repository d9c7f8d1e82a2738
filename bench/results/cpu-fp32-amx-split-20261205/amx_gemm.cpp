// Build from the repository root: g++ -O2 -std=c++17 -Isrc/cpu -march=sapphirerapids bench/results/cpu-fp32-amx-split-20261205/amx_gemm.cpp -o /tmp/amx_gemm && /tmp/amx_gemm
// One tile_gemm (amx_tiles.hpp) alone: args M N K accumulate reps split(0|1); bf16 or split fp32.
#define FA_ISA_NS amx
#define FA_VW 16
#include <sys/syscall.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels/amx_tiles.hpp"
using namespace flashattn::detail::cpu::amx;
int main(int argc, char** argv) {
  syscall(SYS_arch_prctl, 0x1023, 18);
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]); bool acc = atoi(argv[4]);
  int reps = atoi(argv[5]); int split = atoi(argv[6]);
  int P = split ? 3 : 1;
  std::vector<uint16_t> A(size_t(M) * K * P + 64), B(size_t(K) * N * P + 64);
  for (auto& x : A) x = 0x3f80 ^ (rand() & 0x7f);
  for (auto& x : B) x = 0x3f80 ^ (rand() & 0x7f);
  std::vector<float> C(size_t(M) * N);
  configure_tiles();
  double best = 1e9;
  for (int t = 0; t < 5; ++t) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      if (split) tile_gemm<true>(M, N, K, A.data(), K, B.data(), 2 * N, C.data(), N, acc, int64_t(M) * K, int64_t(K) * N);
      else tile_gemm(M, N, K, A.data(), K, B.data(), 2 * N, C.data(), N, acc);
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  release_tiles();
  double fl = 2.0 * M * N * K * reps * (split ? 6 : 1);
  printf("M=%d N=%d K=%d acc=%d split=%d: %.0f bf16-GFLOP/s per core (%.1f%% of 1024 flop/cyc @3.3GHz)\n", M, N, K, acc, split, fl / best / 1e9,
         100 * fl / best / 1e9 / 3379);
}
