// The bf16 GEMM engine on AMX tiles (kernels_amx.cpp): the tile
// configuration, a blocked tile GEMM, and the split GEMM as a job issued a
// few products at a time (SplitGemmJob). dpbf16_gemm.hpp offers the same
// configuration and GEMM on AVX512-BF16 dot products; bf16_pack.hpp builds
// the operand layouts both read.
//
// TDPBF16PS C += A B on tiles: C is 16 x 16 fp32, A is 16 rows x 32 bf16
// (row-major), B is 16 rows x 16 *pairs*: B row r holds (B[2r][n], B[2r+1][n])
// for n = 0..15 (the "VNNI" layout: two consecutive k of one column side by
// side). Products are exact in fp32 and summed in fp32, so a bf16 operand
// stream gives the fp32-accumulated result the correctness rule expects.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "simd.hpp"

// gcc spells the macros __AMX_TILE__ / __AMX_BF16__, clang __AMXTILE__ / __AMXBF16__.
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_BF16__) || defined(__AMXBF16__)) || \
    !defined(__AVX512BF16__)
#error "amx_tiles.hpp needs -mamx-tile -mamx-bf16 -mavx512bf16"
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

// Every tile register as 16 rows x 64 bytes, palette 1: one configuration for
// every GEMM, so it is loaded once per task (LDTILECFG is not free) and the
// edges are handled by zero padding instead of per-shape configurations.
// Registers: 0-3 C (2 x 2 block), 4-5 A, 6-7 B.
struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
constexpr TileConfig kTileConfig = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
// From static storage: gcc 12 does not see LDTILECFG read its 64-byte operand
// and dropped the stores of a stack copy (the tiles came up unconfigured).
inline void configure_tiles() { _tile_loadconfig(&kTileConfig); }
// Hands the tile state back (a thread that leaves it configured pays for
// saving 8 KiB more on every context switch).
inline void release_tiles() { _tile_release(); }

// The tile unit runs its loads and products in order, and a tile register is
// not renamed: a load waits for the products still reading the register, and
// a product waits for its operand's load. So a product reading a tile loaded
// one product earlier stalls the unit (a 2 x 2 step whose first products read
// the tile loaded last measured 33.6 cycles a product against 20.5 when two
// products stand between: bench/NOTES.md, "fp32 split GEMM schedule").
// split_block_2x2 (tile_block's kSplit 2 x 2 case, below) orders the six
// piece products and each step's four products so that every register is
// reloaded right after its last reader and first read two or more products
// later (four exceptions per 32-deep chunk, found by a search over product
// and step orders), where tile_block's load-then-products order reads each
// tile right after loading it.
//
// kSplit, MB = NB = 2: the pieces' products in the order hi lo, hi hi, hi mid,
// mid mid, mid hi, lo hi, so that consecutive steps change one operand
// (A or B) except across chunks; 14 tile loads per 24 products. A 32-deep
// chunk is six steps of four products (step<0> .. step<5>), which
// SplitGemmJob (below) also issues one at a time.
struct SplitBlock2x2 {
  const uint16_t* A;
  int64_t lda, pa;
  const uint16_t* B;
  int64_t ldb, pb;
  static constexpr int kHi = 0, kMid = 1, kLo = 2;

  // A's top / bottom 16 rows and B's left / right 16 columns of piece p at depth k.
  void a_top(int p, int64_t k) const { _tile_loadd(4, A + p * pa + k, int(lda * 2)); }
  void a_bot(int p, int64_t k) const { _tile_loadd(5, A + p * pa + 16 * lda + k, int(lda * 2)); }
  void b_left(int p, int64_t k) const { _tile_loadd(6, B + p * pb + (k / 2) * ldb, int(ldb * 2)); }
  void b_right(int p, int64_t k) const { _tile_loadd(7, B + p * pb + (k / 2) * ldb + 32, int(ldb * 2)); }

  // C's four tiles (loaded or zeroed) and the first chunk's operands.
  void begin(float* C, int64_t ldc, bool accumulate) const {
    const int sc = int(ldc * 4);
    if (accumulate) {
      _tile_loadd(0, C, sc);
      _tile_loadd(1, C + 16, sc);
      _tile_loadd(2, C + 16 * ldc, sc);
      _tile_loadd(3, C + 16 * ldc + 16, sc);
    } else {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
    }
    a_top(kHi, 0);
    b_left(kLo, 0);
    a_bot(kHi, 0);
    b_right(kLo, 0);
  }
  void end(float* C, int64_t ldc) const {
    const int sc = int(ldc * 4);
    _tile_stored(0, C, sc);
    _tile_stored(1, C + 16, sc);
    _tile_stored(2, C + 16 * ldc, sc);
    _tile_stored(3, C + 16 * ldc + 16, sc);
  }

  // The four products of a step: C(i, j) += A(i) B(j), tile 2i + j, A's top
  // (i = 0, tmm4) / bottom (tmm5) rows, B's left (j = 0, tmm6) / right (tmm7).
  // Before a B change the left column's products go first, so that the new
  // left tile loads while the right's run; before an A change the top row's.
  void step_then_b(int p, int64_t k) const {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    b_left(p, k);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(3, 5, 7);
    b_right(p, k);
  }
  void step_then_a(int p, int64_t k) const {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    a_top(p, k);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    a_bot(p, k);
  }
  // Step kStep of the chunk at depth k (of K).
  template <int kStep>
  void step(int64_t k, int64_t K) const {
    if constexpr (kStep == 0) step_then_b(kHi, k);  // hi lo, then B -> hi
    if constexpr (kStep == 1) step_then_b(kMid, k);  // hi hi, then B -> mid
    if constexpr (kStep == 2) step_then_a(kMid, k);  // hi mid, then A -> mid
    if constexpr (kStep == 3) {
      // mid mid, then B -> hi: after an A change the top row first (its tile
      // loaded earliest), the left tile reloaded after its last reader.
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      b_left(kHi, k);
      _tile_dpbf16ps(3, 5, 7);
      b_right(kHi, k);
    }
    if constexpr (kStep == 4) step_then_a(kLo, k);  // mid hi, then A -> lo
    if constexpr (kStep == 5) {
      // lo hi; the next chunk's hi lo (both operands change)
      const int64_t kn = k + 32;
      const bool more = kn < K;
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if (more) a_top(kHi, kn);
      _tile_dpbf16ps(2, 5, 6);
      if (more) b_left(kLo, kn);
      _tile_dpbf16ps(3, 5, 7);
      if (more) {
        a_bot(kHi, kn);
        b_right(kLo, kn);
      }
    }
  }
};

inline void split_block_2x2(int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B,
                            int64_t ldb, int64_t pb, float* C, int64_t ldc, bool accumulate) {
  const SplitBlock2x2 b{A, lda, pa, B, ldb, pb};
  b.begin(C, ldc, accumulate);
  for (int64_t k = 0; k < K; k += 32) {
    b.step<0>(k, K);
    b.step<1>(k, K);
    b.step<2>(k, K);
    b.step<3>(k, K);
    b.step<4>(k, K);
    b.step<5>(k, K);
  }
  b.end(C, ldc);
}

// FA_AMX_SPLIT_SCHEDULE=0 (A/B builds): split 2 x 2 blocks in tile_block's
// load-then-products order instead of split_block_2x2's.
#ifndef FA_AMX_SPLIT_SCHEDULE
#define FA_AMX_SPLIT_SCHEDULE 1
#endif

// One (16*MB) x (16*NB) block of C (+)= A B over K (a multiple of 32).
// A: bf16 rows, lda elements apart. B: VNNI rows of pairs, ldb bf16 elements
// apart (row r holds k = 2r, 2r+1). C: fp32 rows, ldc floats apart.
// kSplit: A and B are fp32 matrices held as three bf16 pieces each
// (x = hi + mid + lo, split3 in bf16_pack.hpp), piece p of A at A + p * pa,
// of B at B + p * pb, and C (+)= the six piece products of weight 2^-16 or
// more (hi hi, hi mid, mid hi, hi lo, lo hi, mid mid): the fp32 product to
// within ~2^-24 of |a| |b|, as an fp32 FMA's rounding leaves it.
template <int MB, int NB, bool kSplit = false>
inline void tile_block(int64_t K, const uint16_t* A, int64_t lda, int64_t pa, const uint16_t* B,
                       int64_t ldb, int64_t pb, float* C, int64_t ldc, bool accumulate) {
  if constexpr (kSplit && MB == 2 && NB == 2 && FA_AMX_SPLIT_SCHEDULE)
    return split_block_2x2(K, A, lda, pa, B, ldb, pb, C, ldc, accumulate);
  const int sa = int(lda * 2), sb = int(ldb * 2), sc = int(ldc * 4);
  if (accumulate) {
    _tile_loadd(0, C, sc);
    if constexpr (NB == 2) _tile_loadd(1, C + 16, sc);
    if constexpr (MB == 2) _tile_loadd(2, C + 16 * ldc, sc);
    if constexpr (MB == 2 && NB == 2) _tile_loadd(3, C + 16 * ldc + 16, sc);
  } else {
    _tile_zero(0);
    if constexpr (NB == 2) _tile_zero(1);
    if constexpr (MB == 2) _tile_zero(2);
    if constexpr (MB == 2 && NB == 2) _tile_zero(3);
  }
  for (int64_t k = 0; k < K; k += 32) {
    auto load_a = [&](int p) {
      _tile_loadd(4, A + p * pa + k, sa);
      if constexpr (MB == 2) _tile_loadd(5, A + p * pa + 16 * lda + k, sa);
    };
    auto load_b = [&](int p) {
      const uint16_t* b = B + p * pb + (k / 2) * ldb;
      _tile_loadd(6, b, sb);
      if constexpr (NB == 2) _tile_loadd(7, b + 32, sb);
    };
    auto dot = [&] {
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NB == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (MB == 2) _tile_dpbf16ps(2, 5, 6);
      if constexpr (MB == 2 && NB == 2) _tile_dpbf16ps(3, 5, 7);
    };
    if constexpr (kSplit) {
      // Ordered so that each load feeds as many products as it can: 16 tile
      // loads (2 x 2 block) for 24 products instead of 24.
      load_a(0);
      load_b(1); dot();             // hi mid
      load_b(2); dot();             // hi lo
      load_b(0); dot();             // hi hi
      load_a(1); dot();             // mid hi
      load_a(2); dot();             // lo hi
      load_a(1); load_b(1); dot();  // mid mid
    } else {
      load_a(0);
      load_b(0);
      dot();
    }
  }
  _tile_stored(0, C, sc);
  if constexpr (NB == 2) _tile_stored(1, C + 16, sc);
  if constexpr (MB == 2) _tile_stored(2, C + 16 * ldc, sc);
  if constexpr (MB == 2 && NB == 2) _tile_stored(3, C + 16 * ldc + 16, sc);
}

// C[M x N] (+)= A[M x K] B[K x N]; M, N multiples of 16, K of 32, operands
// zero padded to those sizes. The N loop is inside: each A panel (32 rows)
// is read from L1 once per 32 columns, the B panel streams. kSplit: three
// pieces per operand, pa / pb apart (tile_block).
template <bool kSplit = false>
inline void tile_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                      const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate,
                      int64_t pa = 0, int64_t pb = 0) {
  for (int64_t m0 = 0; m0 < M; m0 += 32) {
    const bool m2 = M - m0 >= 32;
    for (int64_t n0 = 0; n0 < N; n0 += 32) {
      const bool n2 = N - n0 >= 32;
      const uint16_t* a = A + m0 * lda;
      const uint16_t* b = B + n0 * 2;
      float* c = C + m0 * ldc + n0;
      if (m2 && n2) tile_block<2, 2, kSplit>(K, a, lda, pa, b, ldb, pb, c, ldc, accumulate);
      else if (m2) tile_block<2, 1, kSplit>(K, a, lda, pa, b, ldb, pb, c, ldc, accumulate);
      else if (n2) tile_block<1, 2, kSplit>(K, a, lda, pa, b, ldb, pb, c, ldc, accumulate);
      else tile_block<1, 1, kSplit>(K, a, lda, pa, b, ldb, pb, c, ldc, accumulate);
    }
  }
}

// The split tile_gemm (kSplit) issued a few products at a time. The tile
// unit computes in the background of the core's other instructions, but the
// reorder buffer retires in order: AVX-512 work placed after a run of
// products can execute only as far as the buffer reaches, so a caller that
// wants that work (the softmax) to run under the products issues them in
// steps of four and runs its own instructions between the steps.
// (Microbenchmark, one core: products in runs of 4-8 overlapped 75-95% of the
// shorter side, runs of 24 or more about half as much; bench/NOTES.md, "Tile
// GEMMs under the softmax".) A 2 x 2 block takes six steps per 32-deep chunk
// (SplitBlock2x2's), an edge block one step in all. Between steps the job
// owns the tile registers: jobs run one after another, never interleaved with
// each other. (bf16's GEMMs are too short for the overlap to pay, and
// FA_AMX_SPLIT_SCHEDULE=0 has no steps: both run as bf16_gemm.hpp's
// WholeGemmJob.)
class SplitGemmJob {
 public:
  SplitGemmJob() = default;  // no work
  SplitGemmJob(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, int64_t pa,
               const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc, bool accumulate)
      : M_(N > 0 ? M : 0), N_(N), K_(K), A_(A), lda_(lda), pa_(pa), B_(B), ldb_(ldb), pb_(pb), C_(C),
        ldc_(ldc), accumulate_(accumulate) {}

  bool done() const { return m0_ >= M_; }
  // Steps of the whole job (for pacing it over the caller's loop).
  int64_t steps() const {
    const int64_t full = (M_ / 32) * (N_ / 32), all = ((M_ + 31) / 32) * ((N_ + 31) / 32);
    return full * (K_ / 32) * 6 + (all - full);
  }
  // Inlined into the caller's loop, so that the job's state stays in
  // registers there (a call per step measured ~5% more time on the fp32
  // forward at 2k tokens).
  __attribute__((always_inline)) void step() {
    const uint16_t* a = A_ + m0_ * lda_;
    const uint16_t* b = B_ + n0_ * 2;
    float* c = C_ + m0_ * ldc_ + n0_;
    const bool m2 = M_ - m0_ >= 32, n2 = N_ - n0_ >= 32;
    if (!(m2 && n2) || K_ == 0) {
      if (m2 && n2) tile_block<2, 2, true>(K_, a, lda_, pa_, b, ldb_, pb_, c, ldc_, accumulate_);
      else if (m2) tile_block<2, 1, true>(K_, a, lda_, pa_, b, ldb_, pb_, c, ldc_, accumulate_);
      else if (n2) tile_block<1, 2, true>(K_, a, lda_, pa_, b, ldb_, pb_, c, ldc_, accumulate_);
      else tile_block<1, 1, true>(K_, a, lda_, pa_, b, ldb_, pb_, c, ldc_, accumulate_);
      next_block();
      return;
    }
    const SplitBlock2x2 blk{a, lda_, pa_, b, ldb_, pb_};
    if (k_ == 0 && sub_ == 0) blk.begin(c, ldc_, accumulate_);
    switch (sub_) {
      case 0: blk.step<0>(k_, K_); break;
      case 1: blk.step<1>(k_, K_); break;
      case 2: blk.step<2>(k_, K_); break;
      case 3: blk.step<3>(k_, K_); break;
      case 4: blk.step<4>(k_, K_); break;
      default: blk.step<5>(k_, K_); break;
    }
    if (++sub_ < 6) return;
    sub_ = 0;
    k_ += 32;
    if (k_ < K_) return;
    blk.end(c, ldc_);
    next_block();
  }
  void finish() {
    // Not started: tile_gemm's tight loop (stepping a whole job measured 7%
    // slower on the bf16 forward: each step reloads its state).
    if (m0_ == 0 && n0_ == 0 && k_ == 0 && sub_ == 0 && !done()) {
      tile_gemm<true>(M_, N_, K_, A_, lda_, B_, ldb_, C_, ldc_, accumulate_, pa_, pb_);
      m0_ = M_;
      return;
    }
    while (!done()) step();
  }

 private:
  // tile_gemm's order: the N loop inside.
  void next_block() {
    k_ = 0;
    sub_ = 0;
    n0_ += 32;
    if (n0_ >= N_) {
      n0_ = 0;
      m0_ += 32;
    }
  }
  int64_t M_ = 0, N_ = 0, K_ = 0;
  const uint16_t* A_ = nullptr;
  int64_t lda_ = 0, pa_ = 0;
  const uint16_t* B_ = nullptr;
  int64_t ldb_ = 0, pb_ = 0;
  float* C_ = nullptr;
  int64_t ldc_ = 0;
  bool accumulate_ = false;
  int64_t m0_ = 0, n0_ = 0, k_ = 0;
  int sub_ = 0;
};

}  // namespace flashattn::detail::cpu::FA_ISA_NS
