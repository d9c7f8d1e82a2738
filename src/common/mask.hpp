// Which keys a query row sees: causal (bottom-right aligned) and sliding
// window as one rule, shared by every kernel. The reference implements the
// same semantics separately (src/reference) so a bug here cannot hide.
#pragma once

#include <algorithm>
#include <cstdint>

#include "params.hpp"

// Lets CUDA kernels use the same rule (nvcc needs --expt-relaxed-constexpr for std::max).
#if defined(__CUDACC__)
#define FA_HOST_DEVICE __host__ __device__
#else
#define FA_HOST_DEVICE
#endif

namespace flashattn::detail {

struct KeyRange {
  int64_t begin = 0, end = 0;  // half-open; empty when begin >= end
  FA_HOST_DEVICE bool empty() const { return begin >= end; }
};

struct WindowMask {
  int64_t offset;  // seqlen_k - seqlen_q: query i sits on key diagonal i + offset
  int64_t left, right, seqlen_k;

  FA_HOST_DEVICE explicit WindowMask(const AttnParams& p)
      : offset(p.seqlen_k - p.seqlen_q), left(p.window_left), right(p.window_right),
        seqlen_k(p.seqlen_k) {}

  // Keys visible to query row i.
  FA_HOST_DEVICE KeyRange keys(int64_t i) const {
    int64_t lo = left < 0 ? 0 : std::max<int64_t>(0, i + offset - left);
    int64_t hi = right < 0 ? seqlen_k : std::min<int64_t>(seqlen_k, i + offset + right + 1);
    return {lo, hi};
  }
  // Union of keys visible to rows [r0, r1): lets a kernel skip whole tiles.
  FA_HOST_DEVICE KeyRange keys(int64_t r0, int64_t r1) const {
    KeyRange a = keys(r0), b = keys(r1 - 1);
    return {a.begin, b.end};
  }
  FA_HOST_DEVICE bool visible(int64_t i, int64_t j) const {
    KeyRange r = keys(i);
    return j >= r.begin && j < r.end;
  }
  // Query rows [begin, end) of [0, seqlen_q) that see a key of [c0, c1): rows
  // i with keys(i).end > c0 and keys(i).begin < c1 (both bounds of keys(i)
  // are non-decreasing in i); begin >= end when none does.
  FA_HOST_DEVICE KeyRange queries(int64_t c0, int64_t c1, int64_t seqlen_q) const {
    int64_t lo = 0, hi = seqlen_q;
    if (right >= 0) lo = std::max<int64_t>(lo, c0 - offset - right);
    if (left >= 0) hi = std::min<int64_t>(hi, c1 - offset + left);
    return {lo, hi};
  }
  // True when every (row, key) of the tile is visible: no per-element masking.
  FA_HOST_DEVICE bool tile_full(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    KeyRange last = keys(r1 - 1), first = keys(r0);
    return c0 >= last.begin && c1 <= first.end;
  }
};

}  // namespace flashattn::detail
