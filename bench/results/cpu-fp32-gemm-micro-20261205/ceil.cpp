#define FA_ISA_NS mk
#define FA_VW 16
#define FA_MR 4
#define FA_NV 4
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include "kernels/gemm.hpp"
using namespace flashattn::detail::cpu::mk;
int main() {
  for (int ldb : {64}) for (int K : {128, 512, 2048}) {
    float* A = (float*)aligned_alloc(64, 4*2048*4); float* B = (float*)aligned_alloc(64, 2048*ldb*4); float* C = (float*)aligned_alloc(64, 4*64*4); for (int i=0;i<4*2048;++i) A[i]=0.5f; for (int i=0;i<2048*ldb;++i) B[i]=0.25f; for (int i=0;i<256;++i) C[i]=0;
    auto f = [&] { gemm<true>(4, 64, K, A, 2048, 1, B, ldb, C, 64); asm volatile("" ::: "memory"); };
    for (int i = 0; i < 1000; ++i) f();
    double best = 1e9;
    for (int r = 0; r < 7; ++r) {
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < 20000; ++i) f();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / 20000);
    }
    printf("4x64 K=%d ldb=%d: %.1f GFLOP/s\n", K, ldb, 2.0 * 4 * 64 * K / best / 1e9);
  }
}
