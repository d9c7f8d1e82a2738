// 2 x 1 split blocks (32 rows x 16 columns) whose accumulators alternate between
// tmm0/1 and tmm2/3 from one block to the next, so that a block's C stores can
// overlap the next block's first products; B double-buffered in tmm6/tmm7.
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
// blk2x2: amx_tiles.hpp split_block_2x2 pasted here as a noinline function (gemm6_blk.inc when run)
#include "gemm6_blk.inc"
// C0/C1: the accumulators (top, bottom); B double buffer: b in tmm6 / tmm7 alternately.
__attribute__((noinline)) void blk21_01(int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc, bool acc) {
  const int sa = int(lda * 2), sb = int(ldb * 2), sc = int(ldc * 4);
  if (acc) { _tile_loadd(0, C, sc); _tile_loadd(1, C + 16 * ldc, sc); } else { _tile_zero(0); _tile_zero(1); }
  // products hl hh hm mm mh lh; B alternates registers on each B change.
  for (int64_t k = 0; k < K; k += 32) {
    const uint16_t* b = B + (k / 2) * ldb;
    const uint16_t* a = A + k;
    _tile_loadd(4, a, sa); _tile_loadd(5, a + 16 * lda, sa);          // A hi
    _tile_loadd(6, b + 2 * pb, sb);                                    // B lo
    _tile_loadd(7, b, sb);                                             // B hi (next)
    _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 5, 6);               // hi lo
    _tile_loadd(6, b + pb, sb);                                        // B mid (next next)
    _tile_dpbf16ps(0, 4, 7); _tile_dpbf16ps(1, 5, 7);               // hi hi
    _tile_dpbf16ps(0, 4, 6);                                          // hi mid (top)
    _tile_loadd(4, a + pa, sa);                                        // A mid top
    _tile_dpbf16ps(1, 5, 6);                                          // hi mid (bottom)
    _tile_loadd(5, a + pa + 16 * lda, sa);                             // A mid bottom
    _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 5, 6);               // mid mid
    _tile_dpbf16ps(0, 4, 7);                                          // mid hi (top)
    _tile_loadd(4, a + 2 * pa, sa);                                    // A lo top
    _tile_dpbf16ps(1, 5, 7);                                          // mid hi (bottom)
    _tile_loadd(5, a + 2 * pa + 16 * lda, sa);                         // A lo bottom
    _tile_dpbf16ps(0, 4, 7); _tile_dpbf16ps(1, 5, 7);               // lo hi
  }
  _tile_stored(0, C, sc); _tile_stored(1, C + 16 * ldc, sc);
}
__attribute__((noinline)) void blk21_23(int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc, bool acc) {
  const int sa = int(lda * 2), sb = int(ldb * 2), sc = int(ldc * 4);
  if (acc) { _tile_loadd(2, C, sc); _tile_loadd(3, C + 16 * ldc, sc); } else { _tile_zero(2); _tile_zero(3); }
  // products hl hh hm mm mh lh; B alternates registers on each B change.
  for (int64_t k = 0; k < K; k += 32) {
    const uint16_t* b = B + (k / 2) * ldb;
    const uint16_t* a = A + k;
    _tile_loadd(4, a, sa); _tile_loadd(5, a + 16 * lda, sa);          // A hi
    _tile_loadd(6, b + 2 * pb, sb);                                    // B lo
    _tile_loadd(7, b, sb);                                             // B hi (next)
    _tile_dpbf16ps(2, 4, 6); _tile_dpbf16ps(3, 5, 6);               // hi lo
    _tile_loadd(6, b + pb, sb);                                        // B mid (next next)
    _tile_dpbf16ps(2, 4, 7); _tile_dpbf16ps(3, 5, 7);               // hi hi
    _tile_dpbf16ps(2, 4, 6);                                          // hi mid (top)
    _tile_loadd(4, a + pa, sa);                                        // A mid top
    _tile_dpbf16ps(3, 5, 6);                                          // hi mid (bottom)
    _tile_loadd(5, a + pa + 16 * lda, sa);                             // A mid bottom
    _tile_dpbf16ps(2, 4, 6); _tile_dpbf16ps(3, 5, 6);               // mid mid
    _tile_dpbf16ps(2, 4, 7);                                          // mid hi (top)
    _tile_loadd(4, a + 2 * pa, sa);                                    // A lo top
    _tile_dpbf16ps(3, 5, 7);                                          // mid hi (bottom)
    _tile_loadd(5, a + 2 * pa + 16 * lda, sa);                         // A lo bottom
    _tile_dpbf16ps(2, 4, 7); _tile_dpbf16ps(3, 5, 7);               // lo hi
  }
  _tile_stored(2, C, sc); _tile_stored(3, C + 16 * ldc, sc);
}
int main(int argc, char** argv) {
  syscall(SYS_arch_prctl, 0x1023, 18); cfg();
  const int64_t M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
  const int64_t lda = 3 * K, pa = K, ldb = 2 * N + 32, pb = (K / 2) * ldb, ldc = N + 16;
  std::vector<uint16_t> A(M * lda + 64), B(3 * pb + 64); std::vector<float> C(M * ldc + 64, 0.f);
  for (auto& x : A) x = 0x3f80 + (rand() & 0x7f); for (auto& x : B) x = 0x3f80 + (rand() & 0x7f);
  for (int w = 0; w < 200000; ++w) _tile_dpbf16ps(0, 4, 6);
  const double tdps = double(M / 32) * (N / 32) * (K / 32) * 24;
  for (int round = 0; round < 2; ++round) {
    for (int v = 0; v < 2; ++v) {
      double best = 1e30;
      for (int rep = 0; rep < 20; ++rep) {
        uint64_t t0 = __rdtsc();
        for (int64_t m0 = 0; m0 < M; m0 += 32)
          if (v == 0) {
            for (int64_t n0 = 0; n0 < N; n0 += 32)
              blk2x2(K, A.data() + m0 * lda, lda, pa, B.data() + n0 * 2, ldb, pb, C.data() + m0 * ldc + n0, ldc, true);
          } else {
            for (int64_t n0 = 0; n0 < N; n0 += 32) {
              blk21_01(K, A.data() + m0 * lda, lda, pa, B.data() + n0 * 2, ldb, pb, C.data() + m0 * ldc + n0, ldc, true);
              blk21_23(K, A.data() + m0 * lda, lda, pa, B.data() + n0 * 2 + 32, ldb, pb, C.data() + m0 * ldc + n0 + 16, ldc, true);
            }
          }
        best = std::min(best, double(__rdtsc() - t0));
      }
      printf("M=%ld N=%ld K=%ld %s: %.1f cycles per product\n", M, N, K, v ? "2x1 alt" : "2x2 lib", best / tdps / 0.725);
    }
  }
}
