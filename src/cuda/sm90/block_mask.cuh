// Device form of src/common/mask.hpp's WindowMask (causal = window_right 0,
// bottom-right aligned): query i sees keys [lo(i), hi(i)). Both bounds are
// non-decreasing in i, which is what the tile-range and full-tile tests use.
#pragma once

#include "split_kv.hpp"

namespace flashattn::detail::cuda::sm90 {

struct BlockMask {
  int offset;  // seqlen_k - seqlen_q
  int left, right, seqlen_k;

  __device__ __forceinline__ int lo(int i) const { return left < 0 ? 0 : max(0, i + offset - left); }
  __device__ __forceinline__ int hi(int i) const {
    return right < 0 ? seqlen_k : min(seqlen_k, i + offset + right + 1);
  }
};

// The key tiles [n_begin, n_end) a query tile [r0, r1) must visit (r1 > r0).
template <int kBlockN>
__device__ __forceinline__ KeyTileRange key_tile_range(const BlockMask& mask, int r0, int r1) {
  int kb = mask.lo(r0), ke = mask.hi(r1 - 1);
  if (ke <= kb) return {0, 0};
  return {kb / kBlockN, (ke + kBlockN - 1) / kBlockN};
}

// True when every (row, key) pair of rows [r0, r1) x keys [c0, c0 + kBlockN)
// is visible, so the tile needs no per-element mask. A tile that reaches past
// seqlen_k is never full (hi <= seqlen_k), which masks the zero-filled keys.
template <int kBlockN>
__device__ __forceinline__ bool tile_is_full(const BlockMask& mask, int r0, int r1, int c0) {
  return c0 >= mask.lo(r1 - 1) && c0 + kBlockN <= mask.hi(r0);
}

}  // namespace flashattn::detail::cuda::sm90
