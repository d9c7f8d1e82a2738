#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
// decode-like read: K and V caches [S][4 heads][128] fp32; per tile of 64 rows, per head:
// read K rows' head slice, then V rows' head slice. mode 0: no prefetch; 1: burst prefetch of next tile's
// rows (1/4 per head, like decode_task); 2: head-major contiguous layout (ideal stream)
int main(int argc, char** argv) {
  int mode = atoi(argv[1]);
  const size_t S = 65536, H = 4, D = 128, row = H * D;
  float* K = (float*)aligned_alloc(64, S * row * 4); float* V = (float*)aligned_alloc(64, S * row * 4);
  memset(K, 0, S * row * 4); memset(V, 0, S * row * 4);
  // flush: big buffer
  size_t fb = size_t(256) << 20; char* F = (char*)malloc(fb);
  for (int rep = 0; rep < 4; ++rep) {
    memset(F, rep, fb);
    auto t0 = std::chrono::steady_clock::now();
    __m256 acc = _mm256_setzero_ps();
    if (mode >= 4) {
      for (size_t c0 = 0; c0 < S; c0 += 64) {
        if (mode == 6) {
          const size_t KB = atoi(argv[2]); const size_t PF = atoi(argv[3]);
          for (size_t kb = c0; kb < c0 + 64; kb += KB) for (size_t j = 0; j < H; ++j) for (size_t r = kb; r < kb + KB; ++r) {
            if (PF) for (int o = 0; o < 512; o += 64) __builtin_prefetch((const char*)(K + (r + PF) * row + j * D) + o, 0, 3);
            for (size_t e = 0; e < D; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(K + r * row + j * D + e)); }
          for (size_t kb = c0; kb < c0 + 64; kb += KB) for (size_t j = 0; j < H; ++j) for (size_t cb = 0; cb < D; cb += 16) for (size_t r = kb; r < kb + KB; ++r)
            { acc = _mm256_add_ps(acc, _mm256_load_ps(V + r * row + j * D + cb)); acc = _mm256_add_ps(acc, _mm256_load_ps(V + r * row + j * D + cb + 8)); }
        } else if (mode == 4) {
          for (size_t r = c0; r < c0 + 64; ++r) for (size_t e = 0; e < row; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(K + r * row + e));
          for (size_t r = c0; r < c0 + 64; ++r) for (size_t e = 0; e < row; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(V + r * row + e));
        } else {
          for (size_t r = c0; r < c0 + 64; ++r) { for (size_t e = 0; e < row; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(K + r * row + e));
          for (size_t e = 0; e < row; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(V + r * row + e)); }
        }
      }
    } else
    for (size_t c0 = 0; c0 < S; c0 += 64) {
      for (size_t j = 0; j < H; ++j) {
        if (mode == 1 && c0 + 64 < S) {
          for (size_t r = c0 + 64 + 16 * j; r < c0 + 64 + 16 * (j + 1); ++r)
            for (size_t o = 0; o < row * 4; o += 64) { __builtin_prefetch((char*)(K + r * row) + o, 0, 3); __builtin_prefetch((char*)(V + r * row) + o, 0, 3); }
        }
        for (size_t r = c0; r < c0 + 64; ++r) {
          const float* k = mode == 2 ? K + (j * S + r) * D : K + r * row + j * D;
          if (mode == 3 && c0 + 64 < S) for (int o = 0; o < 512; o += 64) { __builtin_prefetch((const char*)(k + 64 * row) + o, 0, 3); __builtin_prefetch((const char*)(V + (r + 64) * row + j * D) + o, 0, 3);}
          for (int e = 0; e < 128; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(k + e));
        }
        for (size_t r = c0; r < c0 + 64; ++r) {
          const float* v = mode == 2 ? V + (j * S + r) * D : V + r * row + j * D;
          for (int e = 0; e < 128; e += 8) acc = _mm256_add_ps(acc, _mm256_load_ps(v + e));
        }
      }
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    float out[8]; _mm256_storeu_ps(out, acc);
    printf("mode %d: %.2f GB/s %g\n", mode, 2.0 * S * row * 4 / dt / 1e9, out[0]);
  }
}
