// Per-element causal/window masking of a score tile that is not fully
// visible (WindowMask::tile_full is false): masked scores become -inf.
// Only WindowMask::keys(i) decides visibility; these helpers only lay its
// answer over the tile in vector-friendly form.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/mask.hpp"
#include "simd.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

// S layout: row i = query r0 + i, column j = key c0 + j, s[i * ld + j].
// The visible keys of a row are one contiguous run, so the rest is two fills.
inline void mask_rows(float* s, ptrdiff_t ld, const WindowMask& mask, int64_t r0, int64_t nq,
                      int64_t c0, int64_t nk) {
  for (int64_t i = 0; i < nq; ++i) {
    const KeyRange r = mask.keys(r0 + i);
    const int64_t lo = std::min(nk, std::max<int64_t>(0, r.begin - c0));
    const int64_t hi = std::max(lo, std::min(nk, r.end - c0));
    float* row = s + i * ld;
    for (int64_t j = 0; j < lo; ++j) row[j] = kNegInf;
    for (int64_t j = hi; j < nk; ++j) row[j] = kNegInf;
  }
}

// S^T layout: row j = key c0 + j, column i = query r0 + i (vector lanes),
// st[j * ld + i], ncol = columns in use (a multiple of VW). lohi: scratch for
// 2 * ncol int32. Columns past nq are masked entirely.
inline void mask_cols(float* st, ptrdiff_t ld, int32_t* lohi, const WindowMask& mask,
                      int64_t r0, int64_t nq, int64_t ncol, int64_t c0, int64_t nk) {
  int32_t *lo = lohi, *hi = lohi + ncol;
  for (int64_t i = 0; i < ncol; ++i) {
    if (i < nq) {
      const KeyRange r = mask.keys(r0 + i);
      lo[i] = int32_t(std::min(nk, std::max<int64_t>(0, r.begin - c0)));
      hi[i] = int32_t(std::max<int64_t>(lo[i], std::min(nk, r.end - c0)));
    } else {
      lo[i] = hi[i] = 0;
    }
  }
  for (int64_t j = 0; j < nk; ++j) {
    const vi jv = vi{} + int32_t(j);
    for (int64_t c = 0; c < ncol; c += VW) {
      vi l, h;
      __builtin_memcpy(&l, lo + c, sizeof(vi));
      __builtin_memcpy(&h, hi + c, sizeof(vi));
      float* x = st + j * ld + c;
      vstore(x, vsel((l <= jv) & (jv < h), vload(x), vsplat(kNegInf)));
    }
  }
}

// As mask_cols, with each column's visible keys given once per task as
// absolute bounds [lo[i], hi[i]) (lo = hi = 0 for columns past the rows in
// use). The forward and the packed-GQA decode both mask through this.
inline void mask_cols_abs(float* st, ptrdiff_t ld, const int32_t* lo, const int32_t* hi,
                          int64_t ncol, int64_t c0, int64_t nk) {
  for (int64_t j = 0; j < nk; ++j) {
    const vi jv = vi{} + int32_t(c0 + j);
    for (int64_t c = 0; c < ncol; c += VW) {
      vi l, h;
      __builtin_memcpy(&l, lo + c, sizeof(vi));
      __builtin_memcpy(&h, hi + c, sizeof(vi));
      float* x = st + j * ld + c;
      vstore(x, vsel((l <= jv) & (jv < h), vload(x), vsplat(kNegInf)));
    }
  }
}

// Columns [begin, end) of a S^T tile, whole vectors, that hold every column
// c < nq seeing a key of [c0, c0 + nk) by its absolute bounds [lo[c], hi[c]);
// begin >= end when no column sees one.
struct ColumnRange {
  int64_t begin, end;
};
inline ColumnRange visible_columns(const int32_t* lo, const int32_t* hi, int64_t nq, int64_t c0,
                                   int64_t nk) {
  int64_t first = nq, last = -1;
  for (int64_t c = 0; c < nq; ++c) {
    if (std::max<int64_t>(lo[c], c0) < std::min<int64_t>(hi[c], c0 + nk)) {
      first = std::min(first, c);
      last = c;
    }
  }
  if (last < 0) return {0, 0};
  return {first / VW * VW, (last / VW + 1) * VW};
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
