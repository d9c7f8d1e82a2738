// P V of the fp32 forward at its real shapes: O[256 x 128] += P[256 x 64] V[64 x 128],
// P^T stored [64][272], V rows `ldv` floats apart (in place in a [S, H, D] tensor: H * 128).
#define FA_ISA_NS mk
#define FA_VW 16
#ifndef FA_MR
#define FA_MR 4
#endif
#ifndef FA_NV
#define FA_NV 4
#endif
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
template <class T> struct AA { using value_type = T; AA() = default; template <class U> AA(const AA<U>&) {} T* allocate(size_t n) { return (T*)aligned_alloc(64, (n*sizeof(T)+63)/64*64); } void deallocate(T* p, size_t) { free(p); } bool operator==(const AA&) const { return true; } bool operator!=(const AA&) const { return false; } };
template <class T> using avec = std::vector<T, AA<T>>;
#include "kernels/gemm.hpp"
using namespace flashattn::detail::cpu::mk;
int main(int argc, char** argv) {
  const int d = 128, BR = 256, BC = 64, FLD = 272;
  avec<float> PT(BC * FLD, 0.01f), O(BR * d), QT(d * FLD, 0.2f), S(BC * FLD);
  for (int ldv : {144, 512, 4096}) {
    avec<float> V(size_t(BC) * ldv, 0.1f), K(size_t(BC) * ldv, 0.3f);
    auto run = [&](const char* name, auto f) {
      for (int i = 0; i < 100; ++i) f();
      double best = 1e9;
      for (int r = 0; r < 7; ++r) {
        auto t = std::chrono::steady_clock::now();
        for (int i = 0; i < 500; ++i) f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / 500);
      }
      printf("%s ldv=%d MR=%d NV=%d: %.1f GFLOP/s\n", name, ldv, FA_MR, FA_NV, 2.0 * BR * BC * d / best / 1e9);
    };
    run("PV ", [&] { gemm<true>(BR, d, BC, PT.data(), 1, FLD, V.data(), ldv, O.data(), d); asm volatile("" ::: "memory"); });
    run("S^T", [&] { gemm<false>(BC, BR, d, K.data(), ldv, 1, QT.data(), FLD, S.data(), FLD); asm volatile("" ::: "memory"); });
  }
}
