// The ceiling loops, written once over a GCC vector of CEIL_VW floats; each
// ceilings_<isa>.cpp defines CEIL_VW and CEIL_FN and includes this file with its
// own -m flags (ceilings.hpp says why).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ceilings.hpp"

namespace {

using Clock = std::chrono::steady_clock;
typedef float vf __attribute__((vector_size(CEIL_VW * 4)));

float hsum(vf v) {
  float s = 0;
  for (int i = 0; i < CEIL_VW; ++i) s += v[i];
  return s;
}

// 24 independent accumulators hide the FMA latency (4-5 cycles x 2 ports +
// slack); 12 on AVX2, whose 16 ymm registers must also hold a and b.
constexpr int kAcc = CEIL_VW == 16 ? 24 : 12;

double fma_peak_gflops() {
  const long iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    float sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
      vf acc[kAcc];
      for (int i = 0; i < kAcc; ++i) acc[i] = vf{} + float(i) * 1e-3f;
      const vf a = vf{} + 0.999999f, b = vf{} + 1e-7f;
      // Fully unrolled so that acc[] lives in registers, not on the stack.
      for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
        for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * a + b;  // one FMA (-mfma)
      }
      vf s = acc[0];
      for (int i = 1; i < kAcc; ++i) s += acc[i];
      sink += hsum(s);
    }
    double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    double flops = 2.0 * CEIL_VW * kAcc * double(iters) * omp_get_max_threads();
    if (sink == 12345.f) std::printf("#\n");  // keep the loop alive
    best = std::max(best, flops / sec * 1e-9);
  }
  return best;
}

double read_bandwidth_gbs() {
  const size_t n = size_t(1) << 28;  // 1 GiB of floats
  std::vector<float> x(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    float total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (size_t c = 0; c < n / 64; ++c) {  // one 256-byte block (four lines) per step
      const float* p = x.data() + c * 64;
      vf s{};
      for (int i = 0; i < 64; i += CEIL_VW) {
        vf y;
        std::memcpy(&y, p + i, sizeof y);
        s += y;
      }
      total += hsum(s);
    }
    double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (total == 1.f) std::printf("#\n");
    best = std::max(best, double(n) * 4 / sec * 1e-9);
  }
  return best;
}

}  // namespace

Ceilings CEIL_FN() { return {CEIL_ISA, &fma_peak_gflops, &read_bandwidth_gbs}; }
