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

// 1: an AMX decode step spreads P V's share of the next tile's prefetches
// over the step's phases (the softmax before it an eighth, per eight keys;
// pv_amx's P gathers an eighth, per row; its V interleave half, per key pair;
// its tile products a quarter, per 16-column chunk); 0: over the V
// interleave alone, every four keys, which issued ~28 lines a tick in bursts
// with none in flight during the softmax, the gathers and the products
// (bench/NOTES.md, "Decode: the prefetch ticks spread over the step's phases").
#ifndef FA_DECODE_PV_TICK_PHASES
#define FA_DECODE_PV_TICK_PHASES 1
#endif
#ifndef FA_DECODE_AMX_SCORE_SHARE
#define FA_DECODE_AMX_SCORE_SHARE 4
#endif

#include "amx_tiles.hpp"
#include "bf16_pack.hpp"
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

// Query rows from which pv_amx beats the FMAs: its V interleave costs the
// same for any row count, while the FMAs' work grows with the rows (without
// GQA, one row, it measured 7% slower from memory; bench/NOTES.md).
constexpr int64_t kPvAmxMinRows = 4;
// Keys of one pv_amx call: two 32-key blocks (A tiles 4 and 5).
constexpr int64_t kPvAmxKeys = 64;
// Scratch of pv_amx, in uint16_t: P in rows (two 16 x 32 tiles), then V in
// pairs (kPvAmxKeys / 32 x d / 16 tiles of 16 x 16 pairs).
inline int64_t pv_amx_scratch(int64_t d) { return 2 * 512 + kPvAmxKeys / 32 * (d / 16) * 512; }

// A decode step's P V on AMX tiles: O[r] = alpha[r] O[r] + sum_j P[j][r] V_j
// for r < nr (<= 16) and nk <= kPvAmxKeys keys; P^T fp32 rows lds apart,
// rounded to bf16 (as pv_dpbf16 and the GPU kernels round P); V bf16 rows
// ldv apart, d a multiple of 32; O fp32 rows ldo apart, 16 rows of buffer
// (rows nr.. are added 0). TDPBF16PS wants A with the keys along its rows
// and B with key pairs side by side: P is gathered into rows (its columns
// are the step's query rows), and each pair of V rows is interleaved
// (VPERMT2W, as pv_dpbf16 does) into the B tiles; the O rows are the C
// tiles, 16 head-dim columns at a time. alpha nullptr: no rescale. tick:
// step(work), work as pv_ticks counts it (keys x nr x d), spread over the
// gathers, the V interleave and the tile products (FA_DECODE_PV_TICK_PHASES:
// 7/8 of the step's P V share here, the softmax before it ticks the rest).
template <class Tick>
void pv_amx(int64_t nr, int64_t nk, int64_t d, const float* pt, int64_t lds, const bf16_t* V, int64_t ldv,
            float* o, int64_t ldo, const float* alpha, uint16_t* scratch, Tick* tick) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(V);
  uint16_t *pa = scratch, *vb = scratch + 2 * 512;
  const int64_t nb = (nk + 31) / 32, dc = d / 16;  // key blocks, 16-column chunks of d
  // P rows: A tile b, row r = bf16(P[32b + k][r]) for k < 32, 0 past nk and for r >= nr.
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(int(lds)));
  auto keys_mask = [&](int64_t k0) -> __mmask16 {
    const int64_t n = nk - k0;
    return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
  };
  for (int64_t b = 0; b < nb; ++b) {
    const __mmask16 m0 = keys_mask(32 * b), m1 = keys_mask(32 * b + 16);
    for (int64_t r = 0; r < 16; ++r) {
      __m512i row = _mm512_setzero_si512();
      if (r < nr) {
        const __m512 g0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m0, idx, pt + 32 * b * lds + r, 4);
        const __m512 g1 = m1 ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m1, idx, pt + (32 * b + 16) * lds + r, 4)
                             : _mm512_setzero_ps();
        row = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(g1, g0));
        if (tick && FA_DECODE_PV_TICK_PHASES) tick->step(nk * d / (8 * nb));
      }
      _mm512_storeu_si512(pa + b * 512 + r * 32, row);
    }
  }
  // V pairs: B tile (b, c), row p = (V[32b + 2p][16c + i], V[32b + 2p + 1][16c + i]) for i < 16.
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                      6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  for (int64_t j = 0; j < 32 * nb; j += 2) {
    uint16_t* row = vb + (j / 32) * dc * 512 + (j % 32) / 2 * 32;
    const bool a = j < nk, c = j + 1 < nk;
    for (int64_t e = 0; e < d; e += 32) {
      const __m512i v0 = a ? _mm512_loadu_si512(v + j * ldv + e) : _mm512_setzero_si512();
      const __m512i v1 = c ? _mm512_loadu_si512(v + (j + 1) * ldv + e) : _mm512_setzero_si512();
      _mm512_storeu_si512(row + (e / 16) * 512, _mm512_permutex2var_epi16(v0, lo, v1));
      _mm512_storeu_si512(row + (e / 16 + 1) * 512, _mm512_permutex2var_epi16(v0, hi, v1));
    }
    if (tick && j < nk) {
      if (FA_DECODE_PV_TICK_PHASES) tick->step(nr * d);  // half of P V's work, a key pair at a time
      else if (j & 2) tick->step(4 * nr * d);
    }
  }
  if (alpha) {
    for (int64_t r = 0; r < nr; ++r) {
      const vf a = vsplat(alpha[r]);
      for (int64_t e = 0; e < d; e += VW) vstore(o + r * ldo + e, vload(o + r * ldo + e) * a);
    }
  }
  const int64_t so = ldo * 4;
  _tile_loadd(4, pa, 64);
  if (nb > 1) _tile_loadd(5, pa + 512, 64);
  for (int64_t c = 0; c < dc; ++c) {
    _tile_loadd(0, o + 16 * c, so);
    _tile_loadd(6, vb + c * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (nb > 1) {
      _tile_loadd(7, vb + (dc + c) * 512, 64);
      _tile_dpbf16ps(0, 5, 7);
    }
    _tile_stored(0, o + 16 * c, so);
    if (tick && FA_DECODE_PV_TICK_PHASES) tick->step(nk * nr * d / (4 * dc));
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
