#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
// Decode model: tiles of 64 rows of 2 KB (K then V); W FMAs per 32-byte vector (8 = decode's
// S or P V: 128 FMAs per 512-byte head run), 8 independent chains.
// pf 0 none; 1 burst (next tile's K+V at tile start); 2 spread: each row consumed prefetches row + dist.
template <int W>
double run(float* K, float* V, size_t S, int pf, int dist, char* F, size_t fb, int rep) {
  const size_t row = 512;
  memset(F, rep, fb);
  auto t0 = std::chrono::steady_clock::now();
  __m256 a0 = _mm256_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  const __m256 c = _mm256_set1_ps(0.999f);
  for (size_t c0 = 0; c0 < S; c0 += 64) {
    if (pf == 1 && c0 + 64 < S)
      for (size_t r = c0 + 64; r < c0 + 128; ++r) for (size_t o = 0; o < row * 4; o += 64) {
        __builtin_prefetch((char*)(K + r * row) + o, 0, 3); __builtin_prefetch((char*)(V + r * row) + o, 0, 3); }
    for (int t = 0; t < 2; ++t) {
      float* T = t ? V : K;
      for (size_t r = c0; r < c0 + 64; ++r) {
        if (pf == 2 && r + dist < S) for (size_t o = 0; o < row * 4; o += 64) __builtin_prefetch((char*)(T + (r + dist) * row) + o, 0, 3);
        for (size_t e = 0; e < row; e += 8) {
          __m256 x = _mm256_load_ps(T + r * row + e);
          if (W == 0) { a0 = _mm256_add_ps(a0, x); continue; }
          a0 = _mm256_fmadd_ps(x, c, a0); a1 = _mm256_fmadd_ps(x, c, a1); a2 = _mm256_fmadd_ps(x, c, a2); a3 = _mm256_fmadd_ps(x, c, a3);
          a4 = _mm256_fmadd_ps(x, c, a4); a5 = _mm256_fmadd_ps(x, c, a5); a6 = _mm256_fmadd_ps(x, c, a6); a7 = _mm256_fmadd_ps(x, c, a7);
          if (W == 16) {
          a0 = _mm256_fmadd_ps(x, c, a0); a1 = _mm256_fmadd_ps(x, c, a1); a2 = _mm256_fmadd_ps(x, c, a2); a3 = _mm256_fmadd_ps(x, c, a3);
          a4 = _mm256_fmadd_ps(x, c, a4); a5 = _mm256_fmadd_ps(x, c, a5); a6 = _mm256_fmadd_ps(x, c, a6); a7 = _mm256_fmadd_ps(x, c, a7);
          }
        }
      }
    }
  }
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)), _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  float out[8]; _mm256_storeu_ps(out, s); if (out[0] == 12345) printf("x");
  return 2.0 * S * row * 4 / dt / 1e9;
}
int main(int argc, char** argv) {
  int pf = atoi(argv[1]), w = atoi(argv[2]), dist = argc > 3 ? atoi(argv[3]) : 16;
  const size_t S = 65536, row = 512;
  float* K = (float*)aligned_alloc(64, S * row * 4); float* V = (float*)aligned_alloc(64, S * row * 4);
  memset(K, 0, S * row * 4); memset(V, 0, S * row * 4);
  size_t fb = size_t(256) << 20; char* F = (char*)malloc(fb);
  for (int rep = 0; rep < 3; ++rep) {
    double g = w == 0 ? run<0>(K, V, S, pf, dist, F, fb, rep) : w == 8 ? run<8>(K, V, S, pf, dist, F, fb, rep) : run<16>(K, V, S, pf, dist, F, fb, rep);
    if (rep == 2) printf("pf %d work %d dist %d: %.2f GB/s\n", pf, w, dist, g);
  }
}
