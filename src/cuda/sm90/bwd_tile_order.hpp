// Which query tiles a key tile of the Hopper backward visits, and which key
// tiles visit a query tile (the deterministic dQ order). Plain integer code
// over a mask with fields offset (seqlen_k - seqlen_q), left and right (-1 =
// unbounded), so that the host tests (tests/sm90_tile_order_test.cpp) check
// the same functions the kernel runs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FA_TILE_ORDER_FN __host__ __device__ __forceinline__
#else
#define FA_TILE_ORDER_FN inline
#endif

namespace flashattn::detail::cuda::sm90 {

// Query tiles [first, first + count) holding a row that sees one of the keys
// [c0, c0 + keys): rows i with hi(i) > c0 and lo(i) < c0 + keys (both bounds
// are non-decreasing in i).
struct QueryTileRange {
  int first, count;
};

template <int kBlockM, class Mask>
FA_TILE_ORDER_FN QueryTileRange query_tile_range(const Mask& mask, int seqlen_q, int c0,
                                                  int keys) {
  int64_t i_lo = 0, i_hi = seqlen_q;
  if (mask.right >= 0) {
    const int64_t v = static_cast<int64_t>(c0) - mask.offset - mask.right;
    i_lo = v > i_lo ? v : i_lo;
  }
  if (mask.left >= 0) {
    const int64_t v = static_cast<int64_t>(c0) + keys - mask.offset + mask.left;
    i_hi = v < i_hi ? v : i_hi;
  }
  if (i_lo >= i_hi) return {0, 0};
  const int first = static_cast<int>(i_lo / kBlockM);
  return {first, static_cast<int>((i_hi + kBlockM - 1) / kBlockM) - first};
}

// Deterministic mode: the key tiles whose CTAs visit query tile mt (by
// query_tile_range) are a contiguous run [first, last]. Key tile n visits
// rows [i_lo(n), i_hi(n)); it visits the tile [m0, m0 + kBlockM) iff i_hi(n)
// > m0 and i_lo(n) < m0 + kBlockM, and both ends are non-decreasing in n,
// so first = the smallest n with i_hi(n) > m0 and last = the largest with
// i_lo(n) < m0 + kBlockM (a band mask's ranges are never empty in between).
// With i_hi(n) = min(min((n + 1) kBlockN, Sk) - offset + left, Sq) and
// i_lo(n) = max(n kBlockN - offset - right, 0), both have closed forms.
struct KeyTileRun {
  int first, last;  // last < first: no key tile visits the query tile
};

template <int kBlockM, int kBlockN, class Mask>
FA_TILE_ORDER_FN KeyTileRun key_tiles_of_query_tile(const Mask& mask, int seqlen_q, int seqlen_k,
                                                     int mt) {
  const int n_tiles = (seqlen_k + kBlockN - 1) / kBlockN;
  const int64_t m0 = static_cast<int64_t>(mt) * kBlockM;
  KeyTileRun r{0, n_tiles - 1};
  if (m0 >= seqlen_q) return {0, -1};
  if (mask.left >= 0) {  // min((n + 1) kBlockN, Sk) > x
    const int64_t x = m0 + mask.offset - mask.left;
    if (x >= seqlen_k) return {0, -1};
    r.first = x < 0 ? 0 : static_cast<int>(x / kBlockN);
  }
  if (mask.right >= 0) {  // n kBlockN < y
    const int64_t y = m0 + kBlockM + mask.offset + mask.right;
    // The first n with n kBlockN >= y; the run ends before it.
    const int64_t n_end = y <= 0 ? 0 : (y + kBlockN - 1) / kBlockN;
    if (n_end - 1 < r.last) r.last = static_cast<int>(n_end - 1);
  }
  return r;
}

}  // namespace flashattn::detail::cuda::sm90
