#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <algorithm>
int main() {
  __m512 a[16]; for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-7f);
  __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  double best = 1e9; long n = 20000000;
  for (int r = 0; r < 5; ++r) {
    auto t = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  float s = 0; for (int j = 0; j < 16; ++j) s += _mm512_reduce_add_ps(a[j]);
  printf("FMA loop 1 core: %.1f GFLOP/s (%g)\n", n * 16 * 32.0 / best / 1e9, s);
}
