#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <x86intrin.h>
struct Cfg { uint8_t palette, start; uint8_t res[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static void cfg() { Cfg c; memset(&c,0,sizeof c); c.palette=1; for(int i=0;i<8;++i){c.rows[i]=16;c.colsb[i]=64;} _tile_loadconfig(&c); }
#define PROLOGUE \
  const int sa = int(lda * 2), sb = int(ldb * 2), sc = int(ldc * 4); \
  _tile_loadd(0, C, sc); _tile_loadd(1, C + 16, sc); _tile_loadd(2, C + 16 * ldc, sc); _tile_loadd(3, C + 16 * ldc + 16, sc); \
  auto la0 = [&](int p, int64_t k) { _tile_loadd(4, A + p * pa + k, sa); }; \
  auto la1 = [&](int p, int64_t k) { _tile_loadd(5, A + p * pa + 16 * lda + k, sa); }; \
  auto lb0 = [&](int p, int64_t k) { _tile_loadd(6, B + p * pb + (k / 2) * ldb, sb); }; \
  auto lb1 = [&](int p, int64_t k) { _tile_loadd(7, B + p * pb + (k / 2) * ldb + 32, sb); };
#define EPILOGUE _tile_stored(0, C, sc); _tile_stored(1, C + 16, sc); _tile_stored(2, C + 16 * ldc, sc); _tile_stored(3, C + 16 * ldc + 16, sc);
#define ARGS int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc
// the library's current order
__attribute__((noinline)) void blk_lib(ARGS) {
  PROLOGUE
  for (int64_t k = 0; k < K; k += 32) {
    auto load_a = [&](int p) { la0(p, k); la1(p, k); };
    auto load_b = [&](int p) { lb0(p, k); lb1(p, k); };
    auto dot = [&] { _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7); };
    load_a(0); load_b(1); dot(); load_b(2); dot(); load_b(0); dot(); load_a(1); dot(); load_a(2); dot(); load_a(1); load_b(1); dot();
  }
  EPILOGUE
}
__attribute__((noinline)) void blk_s1(ARGS) {  // search.py's first sequence (hl hh hm mm mh lh)
  PROLOGUE
  la0(0, 0); la1(0, 0); lb0(2, 0); lb1(2, 0);
  for (int64_t k = 0; k < K; k += 32) { const int64_t kn = k + 32; const bool more = kn < K;
#include "chunk.inc"
  }
  EPILOGUE
}
__attribute__((noinline)) void blk_s2(ARGS) {  // best sequence (hm hl hh lh mh mm)
  PROLOGUE
  la0(0, 0); la1(0, 0); lb0(1, 0); lb1(1, 0);
  for (int64_t k = 0; k < K; k += 32) { const int64_t kn = k + 32; const bool more = kn < K;
#include "chunk2.inc"
  }
  EPILOGUE
}

// s1 + prefetch of the next k chunk (or the next block's first chunk) spread over the TDPs
__attribute__((noinline)) void blk_s1pf(ARGS, const uint16_t* nA, const uint16_t* nB) {
  PROLOGUE
  la0(0, 0); la1(0, 0); lb0(2, 0); lb1(2, 0);
  for (int64_t k = 0; k < K; k += 32) { const int64_t kn = k + 32; const bool more = kn < K;
    const uint16_t* pA = more ? A + kn : nA; const uint16_t* pB = more ? B + (kn / 2) * ldb : nB;
#define PF(i) if ((i) < 12) { const uint16_t* a = pA + ((i) / 4) * pa + ((i) % 4) * 8 * lda; \
      for (int r = 0; r < 8; ++r) _mm_prefetch((const char*)(a + r * lda), _MM_HINT_T0); } \
    else { const uint16_t* b = pB + (((i) - 12) / 4) * pb + (((i) - 12) % 4) * 4 * ldb; \
      for (int r = 0; r < 4; ++r) { _mm_prefetch((const char*)(b + r * ldb), _MM_HINT_T0); _mm_prefetch((const char*)(b + r * ldb + 32), _MM_HINT_T0); } }
#include "chunk_pf.inc"
#undef PF
  }
  EPILOGUE
}
typedef void (*Fn)(ARGS);
int main(int argc, char** argv) {
  syscall(SYS_arch_prctl, 0x1023, 18); cfg();
  const int64_t K = atol(argv[1]), M = atol(argv[2]), N = atol(argv[3]); const int vary = atoi(argv[4]);
  const int64_t lda = 3 * K, pa = K, panel = 3 * (K / 2) * 64, pb = (K / 2) * 64, ldc = N;
  std::vector<uint16_t> A(M * lda + 64), B((N / 32) * panel + 64); std::vector<float> C(M * N + 64, 0.f);
  for (auto& x : A) x = 0x3f80 + (rand() & 0x7f); for (auto& x : B) x = 0x3f80 + (rand() & 0x7f);
  for (int w = 0; w < 200000; ++w) _tile_dpbf16ps(0, 4, 6);
  Fn fns[3] = {blk_lib, blk_s1, blk_s2}; const char* nm[4] = {"lib", "s1", "s2", "s1pf"};
  for (int round = 0; round < 2; ++round)
  for (int f = 0; f < 4; ++f) {
    double best = 1e30;
    for (int rep = 0; rep < 30; ++rep) {
      uint64_t t0 = __rdtsc();
      for (int64_t m0 = 0; m0 < M; m0 += 32)
        for (int64_t n0 = 0; n0 < N; n0 += 32)
          if (f == 3) { const int64_t n1 = n0 + 32 < N ? n0 + 32 : 0, m1 = n0 + 32 < N ? m0 : m0 + 32;
            blk_s1pf(K, A.data() + ((vary & 1) ? m0 * lda : 0), lda, pa, B.data() + ((vary & 2) ? (n0 / 32) * panel : 0), 64, pb, C.data() + ((vary & 4) ? m0 * ldc + n0 : 0), ldc,
                     A.data() + ((vary & 1) ? (m1 < M ? m1 : 0) * lda : 0), B.data() + ((vary & 2) ? (n1 / 32) * panel : 0)); } else
          fns[f](K, A.data() + ((vary & 1) ? m0 * lda : 0), lda, pa, B.data() + ((vary & 2) ? (n0 / 32) * panel : 0), 64, pb, C.data() + ((vary & 4) ? m0 * ldc + n0 : 0), ldc);
      best = std::min(best, double(__rdtsc() - t0));
    }
    printf("K=%ld M=%ld N=%ld vary=%d %-4s %.1f core cycles per TDP\n", K, M, N, vary, nm[f], best / (double(M / 32) * (N / 32) * (K / 32) * 24) / 0.725);
  }
}
