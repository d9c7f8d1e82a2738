// Operand packing for the bf16 pair-GEMMs of forward_amx.hpp and
// backward_amx.hpp (AMX tiles or AVX512-BF16 dot products): both read A as
// bf16 rows and B in "VNNI" pairs, B row r holding (B[2r][n], B[2r+1][n]).
// Transposes run as 16 x 16 blocks of 32-bit elements (one bf16 pair each).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "simd.hpp"

#if !defined(__AVX512BF16__) || !defined(__AVX512BW__)
#error "bf16_pack.hpp needs -mavx512bw -mavx512bf16"
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

// bf16 rows at a fixed distance, indexed like an array of row pointers.
struct StridedRows {
  const uint16_t* base;
  int64_t stride;
  const uint16_t* operator[](int64_t i) const { return base + i * stride; }
  const uint16_t* operator()(int64_t i) const { return base + i * stride; }
};

// In-register transpose of a 16 x 16 block of 32-bit elements.
inline void transpose16x16(__m512i r[16]) {
  __m512i a[16], b[16], c[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      c[8 * i + j] = _mm512_shuffle_i32x4(b[8 * i + j], b[8 * i + 4 + j], 0x88);
      c[8 * i + 4 + j] = _mm512_shuffle_i32x4(b[8 * i + j], b[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(c[j], c[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(c[j], c[8 + j], 0xdd);
  }
}

// dst[k * ldd + j] = src(j)[k] for k < kpad (a multiple of 16) and j < jpad
// (a multiple of 32): the transpose of an n x d bf16 matrix whose row j is
// src(j), zero outside j < n, k < d. As 32-bit elements this is the
// transpose of the pair-interleaved rows (src(2r)[k], src(2r+1)[k]), so it
// runs as 16 x 16 transposes of those. Returns true when a value is inf or
// NaN (exponent bits all ones), which the caller's masking must know about.
template <class RowFn>
bool transpose_bf16(RowFn src, int64_t n, int64_t d, int64_t kpad, int64_t jpad, uint16_t* dst,
                    int64_t ldd) {
  const __m256i expo = _mm256_set1_epi16(0x7f80);
  __mmask16 bad = 0;
  for (int64_t j0 = 0; j0 < jpad; j0 += 32) {
    for (int64_t k0 = 0; k0 < kpad; k0 += 16) {
      const __mmask16 km = k0 + 16 <= d ? __mmask16(0xffff)
                                        : __mmask16(k0 < d ? (1u << (d - k0)) - 1 : 0);
      __m512i w[16];
      for (int r = 0; r < 16; ++r) {
        const int64_t j = j0 + 2 * r;
        const __m256i lo = j < n ? _mm256_maskz_loadu_epi16(km, src(j) + k0) : _mm256_setzero_si256();
        const __m256i hi = j + 1 < n ? _mm256_maskz_loadu_epi16(km, src(j + 1) + k0) : _mm256_setzero_si256();
        bad |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(lo, expo), expo) |
               _mm256_cmpeq_epi16_mask(_mm256_and_si256(hi, expo), expo);
        w[r] = _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                               _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
      }
      transpose16x16(w);
      for (int r = 0; r < 16; ++r) _mm512_storeu_si512(dst + (k0 + r) * ldd + j0, w[r]);
    }
  }
  return bad != 0;
}

// B operand "X^T in VNNI pairs" from the rows of X: dst row r (ldd bf16
// apart) holds, for column c < ncol (a multiple of 16), (x_c[2r], x_c[2r + 1])
// for r < round_up(d, 32) / 2; zero past d and for columns c >= n. As 32-bit
// elements that is the transpose of the rows, done 16 x 16 at a time.
template <class Rows>
void transpose_pairs(uint16_t* dst, int64_t ldd, const Rows& rows, int64_t n, int64_t ncol,
                     int64_t d) {
  const int64_t pairs = (d + 31) / 32 * 16;
  for (int64_t c0 = 0; c0 < ncol; c0 += 16) {
    for (int64_t r0 = 0; r0 < pairs; r0 += 16) {
      const int64_t left = d - 2 * r0;  // bf16 elements of this slice inside the row
      const __mmask32 km = left >= 32 ? ~__mmask32(0) : left > 0 ? (__mmask32(1) << left) - 1 : 0;
      __m512i w[16];
      for (int c = 0; c < 16; ++c)
        w[c] = c0 + c < n ? _mm512_maskz_loadu_epi16(km, rows[c0 + c] + 2 * r0) : _mm512_setzero_si512();
      transpose16x16(w);
      for (int r = 0; r < 16; ++r) _mm512_storeu_si512(dst + (r0 + r) * ldd + 2 * c0, w[r]);
    }
  }
}

// B operand "X in VNNI pairs" from the rows of X (n x d): dst row r (ldd bf16
// apart) holds (x_2r[k], x_2r+1[k]) for k < kpad (a multiple of 16), for
// r < rpad (pairs); zero past d and for rows >= n.
template <class Rows>
void interleave_pairs(uint16_t* dst, int64_t ldd, const Rows& rows, int64_t n, int64_t d,
                      int64_t kpad, int64_t rpad) {
  for (int64_t r = 0; r < rpad; ++r) {
    for (int64_t k0 = 0; k0 < kpad; k0 += 16) {
      const __mmask16 km = k0 + 16 <= d ? __mmask16(0xffff)
                                        : __mmask16(k0 < d ? (1u << (d - k0)) - 1 : 0);
      const __m256i lo = 2 * r < n ? _mm256_maskz_loadu_epi16(km, rows[2 * r] + k0) : _mm256_setzero_si256();
      const __m256i hi = 2 * r + 1 < n ? _mm256_maskz_loadu_epi16(km, rows[2 * r + 1] + k0) : _mm256_setzero_si256();
      _mm512_storeu_si512(dst + r * ldd + 2 * k0,
                          _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                                          _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16)));
    }
  }
}

// Rounds two fp32 vectors (k = 2r and 2r + 1 of 16 columns) to bf16 (nearest
// even, NaN kept) and interleaves them into one VNNI row of 16 pairs.
inline __m512i pack_pair_bf16(__m512 even, __m512 odd) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));  // even low, odd high
  return _mm512_permutexvar_epi16(idx, both);
}

// fp32 as three bf16 pieces, x = hi + mid + lo: hi = bf16(x), mid =
// bf16(x - hi), lo = bf16(x - hi - mid), each subtraction exact in fp32, so
// the pieces hold all 24 bits of x (16 + 8 bits below hi's). hi and mid
// come back as fp32 vectors that bf16 holds exactly; lo unrounded (the
// caller's bf16 store rounds it). An inf or NaN stays in hi with mid = lo =
// 0 (x - hi would be NaN), as does a finite x beyond bf16's largest finite
// value (3.39e38, within 0.4% of fp32's), which hi rounds to inf. Values
// below 2^-110 or so lose lo (bf16 denormals, which VCVTNEPS2BF16 and AMX
// flush to zero): an error of 2^-16 of a value that small.
struct Split3 {
  __m512 hi, mid, lo;
};
inline __m512 round_to_bf16(__m512 x) {
  const __m256i b = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}
inline Split3 split3(__m512 x) {
  const __m512 hi = round_to_bf16(x);
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_sub_ps(hi, hi), _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __m512 r = _mm512_maskz_sub_ps(finite, x, hi);
  const __m512 mid = round_to_bf16(r);
  return {hi, mid, _mm512_sub_ps(r, mid)};
}

// One fp32 row of n elements as its three bf16 pieces: piece p at dst + p *
// pstride, each zero padded to npad elements (a multiple of 16).
inline void split_row(const float* x, int64_t n, int64_t npad, uint16_t* dst, int64_t pstride) {
  for (int64_t k = 0; k < npad; k += 16) {
    const __mmask16 km = k + 16 <= n ? __mmask16(0xffff) : __mmask16(k < n ? (1u << (n - k)) - 1 : 0);
    const Split3 s = split3(_mm512_maskz_loadu_ps(km, x + k));
    auto store = [&](int p, __m512 v) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + p * pstride + k),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
    };
    store(0, s.hi);
    store(1, s.mid);
    store(2, s.lo);
  }
}

// Rows 0 .. n - 1 of row(x) (fp32, d elements each) as their three
// pieces (split_row): row x's at dst + x * ld, each piece dq32 wide. Each
// row's lines are prefetched kSplitAhead rows before it is split: K, V and Q
// rows lie a head stride apart ([batch, seq, heads, d]), and the hardware
// prefetchers left these passes waiting on their loads (perf of the fp32
// forward's pre-split: 70% of its samples on the instruction after a load).
constexpr int64_t kSplitAhead = 8;
template <class RowFn>
inline void split_rows(RowFn row, int64_t n, int64_t d, int64_t dq32, uint16_t* dst, int64_t ld) {
  const int64_t bytes = d * int64_t(sizeof(float));
  for (int64_t x = 0; x < std::min(n, kSplitAhead); ++x) prefetch_lines(row(x), bytes);
  for (int64_t x = 0; x < n; ++x) {
    if (x + kSplitAhead < n) prefetch_lines(row(x + kSplitAhead), bytes);
    split_row(row(x), d, dq32, dst + x * ld, dq32);
  }
}

// Rounds two fp32 vectors (k = 2r and 2r + 1 of 16 columns) into one VNNI
// row of 16 pairs per piece of split3, the pieces' rows plane elements
// apart. Split on the packed pairs: each 32-bit lane holds (even, odd)
// bf16, so a shift and a mask widen them back to fp32 for the next
// remainder. For values that are finite or NaN (a NaN stays NaN in every
// piece; an inf would leave NaN in mid and lo: split3 guards that).
inline void store_pair_pieces(uint16_t* dst, int64_t plane, __m512 even, __m512 odd) {
  const __m512i odd_bits = _mm512_set1_epi32(int(0xffff0000u));
  auto widen_e = [](__m512i x) { return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)); };
  auto widen_o = [&](__m512i x) { return _mm512_castsi512_ps(_mm512_and_si512(x, odd_bits)); };
  const __m512i hi = pack_pair_bf16(even, odd);
  const __m512 re = _mm512_sub_ps(even, widen_e(hi)), ro = _mm512_sub_ps(odd, widen_o(hi));
  const __m512i mid = pack_pair_bf16(re, ro);
  const __m512i lo = pack_pair_bf16(_mm512_sub_ps(re, widen_e(mid)), _mm512_sub_ps(ro, widen_o(mid)));
  _mm512_storeu_si512(dst, hi);
  _mm512_storeu_si512(dst + plane, mid);
  _mm512_storeu_si512(dst + 2 * plane, lo);
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
