// Whole split GEMMs in the library's layouts: A rows with the three pieces side by side
// (lda = 3K, pa = K), B VNNI pair rows of all N columns (ldb = 2N), planes pb apart.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <x86intrin.h>
struct Cfg { uint8_t palette, start; uint8_t res[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static void cfg() { Cfg c; memset(&c,0,sizeof c); c.palette=1; for(int i=0;i<8;++i){c.rows[i]=16;c.colsb[i]=64;} _tile_loadconfig(&c); }
template <bool PF>
__attribute__((noinline)) void blk(int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc, bool acc, const uint16_t* nB) {
  const int sa = int(lda * 2), sb = int(ldb * 2), sc = int(ldc * 4);
  if (acc) { _tile_loadd(0, C, sc); _tile_loadd(1, C + 16, sc); _tile_loadd(2, C + 16 * ldc, sc); _tile_loadd(3, C + 16 * ldc + 16, sc); }
  else { _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3); }
  auto la0 = [&](int p, int64_t k) { _tile_loadd(4, A + p * pa + k, sa); };
  auto la1 = [&](int p, int64_t k) { _tile_loadd(5, A + p * pa + 16 * lda + k, sa); };
  auto lb0 = [&](int p, int64_t k) { if (STREAMB) _tile_stream_loadd(6, B + p * pb + (k / 2) * ldb, sb); else _tile_loadd(6, B + p * pb + (k / 2) * ldb, sb); };
  auto lb1 = [&](int p, int64_t k) { if (STREAMB) _tile_stream_loadd(7, B + p * pb + (k / 2) * ldb + 32, sb); else _tile_loadd(7, B + p * pb + (k / 2) * ldb + 32, sb); };
  la0(0, 0); lb0(2, 0); la1(0, 0); lb1(2, 0);
  int pfi = 0; const int64_t pfn = PF && nB ? 3 * (K / 2) : 0;   // next block's B pair rows, 2 lines each
  const int64_t per = (pfn + 4 * (K / 32) * 6 - 1) / std::max<int64_t>(1, 4 * (K / 32) * 6) ;
#define PFX if (PF && nB) { for (int q = 0; q < per && pfi < pfn; ++q, ++pfi) { const uint16_t* r = nB + (pfi / (K / 2)) * pb + (pfi % (K / 2)) * ldb; _mm_prefetch((const char*)r, _MM_HINT_T0); _mm_prefetch((const char*)(r + 32), _MM_HINT_T0); } }
#undef _tile_dpbf16ps
#define _tile_dpbf16ps(a, b, c) { _tile_dpbf16ps_internal(a, b, c); PFX }
  for (int64_t k = 0; k < K; k += 32) { const int64_t kn = k + 32; const bool more = kn < K;
#include "chunk.inc"
  }
#undef _tile_dpbf16ps
  _tile_stored(0, C, sc); _tile_stored(1, C + 16, sc); _tile_stored(2, C + 16 * ldc, sc); _tile_stored(3, C + 16 * ldc + 16, sc);
}
int main(int argc, char** argv) {
  syscall(SYS_arch_prctl, 0x1023, 18); cfg();
  const int64_t M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
  const int64_t lda = 3 * K, pa = K, ldb = 2 * N + 32, pb = (K / 2) * ldb, ldc = N + 16;
  std::vector<uint16_t> A(M * lda + 64), B(3 * pb + 64); std::vector<float> C(M * ldc + 64, 0.f);
  for (auto& x : A) x = 0x3f80 + (rand() & 0x7f); for (auto& x : B) x = 0x3f80 + (rand() & 0x7f);
  for (int w = 0; w < 200000; ++w) _tile_dpbf16ps_internal(0, 4, 6);
  const double tdps = double(M / 32) * (N / 32) * (K / 32) * 24;
  for (int round = 0; round < 2; ++round) {
    for (int64_t KC : {K, int64_t(64), int64_t(32)}) {
      for (int pf = 0; pf < 2; ++pf) {
        if (KC == K && pf) continue;
        double best = 1e30;
        for (int rep = 0; rep < 20; ++rep) {
          uint64_t t0 = __rdtsc();
          for (int64_t k0 = 0; k0 < K; k0 += KC)
            for (int64_t m0 = 0; m0 < M; m0 += 32)
              for (int64_t n0 = 0; n0 < N; n0 += 32) {
                const uint16_t* nb = n0 + 32 < N ? B.data() + (n0 + 32) * 2 + (k0 / 2) * ldb : B.data() + (k0 / 2) * ldb;
                if (pf) blk<true>(KC, A.data() + m0 * lda + k0, lda, pa, B.data() + n0 * 2 + (k0 / 2) * ldb, ldb, pb, C.data() + m0 * ldc + n0, ldc, k0 > 0, nb);
                else blk<false>(KC, A.data() + m0 * lda + k0, lda, pa, B.data() + n0 * 2 + (k0 / 2) * ldb, ldb, pb, C.data() + m0 * ldc + n0, ldc, k0 > 0, nullptr);
              }
          best = std::min(best, double(__rdtsc() - t0));
        }
        printf("M=%ld N=%ld K=%ld KC=%ld pf=%d: %.1f cycles per product\n", M, N, K, KC, pf, best / tdps / 0.725);
      }
    }
  }
}
