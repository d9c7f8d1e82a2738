// The scores of a bf16 decode step on AMX tiles (kernels_amx_decode.cpp):
// S^T = K Q^T with A = 16 K rows read where they lie in the cache (TILELOADD
// takes the row stride, so nothing is copied) and B = the step's query
// columns as Q^T in VNNI pairs, packed once per task. On a Xeon with AMX the
// AVX-512 scores (dot_block: d / 16 FMAs per key and column, then a fold)
// were 42% of a cache-warm GQA decode step and the step itself, not memory,
// bounded the decode (bench/NOTES.md); one TDPBF16PS does 16 keys x 16
// columns x 32 elements. Products of two bf16 are exact in fp32 and summed in
// fp32 (the unscaled q . k), and qmul, the softmax scale, multiplies each
// sum afterwards, as dot_rows_dpbf16 does.
#pragma once

#ifndef FA_DECODE_AMX_SCORE_SHARE
#define FA_DECODE_AMX_SCORE_SHARE 4
#endif

#include "amx_tiles.hpp"
#include "convert.hpp"
#include "simd.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

// The scores' share of a decode step's prefetch spread, per multiply-add,
// against P V's on FMAs (forward.hpp score_work): 1 / kAmxScoreShare.
constexpr int64_t kAmxScoreShare = FA_DECODE_AMX_SCORE_SHARE;

// Floats of the packed Q^T: one 16-row x 16-pair tile (1 KiB) per 32
// elements of the head dimension.
inline int64_t amx_q_floats(int64_t d) { return d / 32 * 256; }

// Q^T tiles of n <= 16 bf16 query rows of d elements (d a multiple of 32):
// tile e, row r, column c holds (q_c[32e + 2r], q_c[32e + 2r + 1]); columns
// n..15 are zero, so their scores come out 0.
inline void pack_q_tiles(uint16_t* qt, const uint16_t* const* rows, int64_t n, int64_t d) {
  for (int64_t e = 0; e < d / 32; ++e) {
    uint16_t* t = qt + e * 512;
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t c = 0; c < 16; ++c) {
        t[r * 32 + 2 * c] = c < n ? rows[c][32 * e + 2 * r] : uint16_t(0);
        t[r * 32 + 2 * c + 1] = c < n ? rows[c][32 * e + 2 * r + 1] : uint16_t(0);
      }
  }
}

// s[j * lds + c] = qmul * (K_j . q_c) for j < nk (a multiple of 16) and the
// 16 columns of the packed qt; K bf16 rows ldk elements apart, d a multiple
// of 32. Tiles configured by the caller (configure_tiles): C in 0-1, A in
// 4-5, B in 6. tick: step(work) per 32 keys, work in score_work's units (key
// rows x nc columns x d / kAmxScoreShare).
template <class Tick>
void dot_rows_amx(int64_t nk, int64_t d, const bf16_t* K, int64_t ldk, const uint16_t* qt, float qmul,
                  float* s, int64_t lds, int nc, Tick* tick) {
  const uint16_t* k = reinterpret_cast<const uint16_t*>(K);
  const int64_t sk = ldk * 2, ss = lds * 4;
  for (int64_t j = 0; j < nk; j += 32) {
    const bool two = j + 32 <= nk;
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t e = 0; e < d; e += 32) {
      _tile_loadd(6, qt + e * 16, 64);
      _tile_loadd(4, k + j * ldk + e, sk);
      _tile_dpbf16ps(0, 4, 6);
      if (two) {
        _tile_loadd(5, k + (j + 16) * ldk + e, sk);
        _tile_dpbf16ps(1, 5, 6);
      }
    }
    _tile_stored(0, s + j * lds, ss);
    if (two) _tile_stored(1, s + (j + 16) * lds, ss);
    const int64_t rows = two ? 32 : 16;
    const vf q = vsplat(qmul);
    for (int64_t r = 0; r < rows; ++r) vstore(s + (j + r) * lds, vload(s + (j + r) * lds) * q);
    if (tick) tick->step(rows * nc * d / kAmxScoreShare);
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
