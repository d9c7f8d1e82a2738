// Online softmax (FlashAttention-2 §3.1 / FlashAttention-3 §3.1) on a wgmma
// accumulator tile.
//
// Register ownership (wgmma m64nN fp32 accumulator, per warpgroup): warp w
// holds rows 16w..16w+15; lane t holds rows r0 = 16w + t/4 and r1 = r0 + 8;
// acc[4j + e] is (r0, 8j + 2(t%4) + e) and acc[4j + 2 + e] is (r1, same col)
// for e in {0,1}. A row is spread over the 4 lanes of a quad, so row
// reductions are two xor-shuffles (1, 2).
//
// Each thread keeps m (a reference max of the raw scores of its rows: the
// running max, or with kLazyRescale up to kStaleLog2 / scale_log2 below it;
// -inf until a visible key appears) and l (its own partial sum; the quad sum happens once,
// in finalize: every quad lane rescales by the same factor, so partial sums
// stay consistent). p = exp2(s * scale_log2 - m * scale_log2): one FFMA + EX2.
// Requires scale > 0 (can_implement), so max of raw s = max of scaled s.
#pragma once

#include <cmath>

#include "ptx.cuh"

namespace flashattn::detail::cuda::sm90 {

template <int kBlockN, int kHeadDim, bool kLazyRescale>
struct OnlineSoftmax {
  static constexpr int kS = kBlockN / 2;  // S accumulator floats per thread
  static constexpr int kO = kHeadDim / 2;  // O accumulator floats per thread
  // kLazyRescale (FlashAttention-4's conditional rescaling): how far (log2)
  // a row's reference max may fall behind the true one before it is moved.
  // P then reaches 2^8 = 256 at most, within e4m3's 448 and far within
  // fp16/bf16, and most key tiles after the first few skip the O rescale
  // (kO multiplies per thread, on the consumer's critical path between P V
  // and the next tile). Without it the max moves with every new maximum.
  static constexpr float kStaleLog2 = 8.f;
  static constexpr float kStaleMaxP = 256.f;  // 2^kStaleLog2
  float m[2];
  float l[2];

  __device__ __forceinline__ void init() {
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }

  // Scores outside [lo_r, hi_r) become -inf; c0 = first key of the tile.
  __device__ __forceinline__ static void apply_mask(float (&s)[kS], int c0, int lane, int lo0,
                                                    int hi0, int lo1, int hi1) {
    const int cbase = c0 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = cbase + 8 * j + e;
        if (c < lo0 || c >= hi0) s[4 * j + e] = -INFINITY;
        if (c < lo1 || c >= hi1) s[4 * j + 2 + e] = -INFINITY;
      }
    }
  }

  // s (raw scores of one key tile) -> unnormalised probabilities in place;
  // updates m and l and returns, per row, the factor exp(m_old - m_new) by
  // which the output accumulator must be rescaled (rescale_o). Kept apart so
  // that the rescale can wait for a P.V wgmma still writing the accumulator.
  // kMoveRef: the references move to the rows' maxima whatever the lag
  // (the exponentials-first step's redo, kernel.cuh softmax_tile).
  template <bool kMoveRef = false>
  __device__ __forceinline__ void step(float (&s)[kS], float scale_log2, float (&corr)[2]) {
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    float neg_ms[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The reference max moves only when the tile's max exceeds it by more
      // than kStaleLog2 (in log2 units): below that, p = exp2(s - m) stays
      // <= 2^kStaleLog2 and O and l need no rescale (corr = 1). From -inf
      // (no visible key yet) it always moves.
      const bool grow = !kLazyRescale || kMoveRef || (mx[r] - m[r]) * scale_log2 > kStaleLog2;
      const float mn = grow ? mx[r] : m[r];
      // A row that has seen only masked keys keeps m = -inf; use 0 as its
      // offset so that exp2(-inf - 0) = 0 instead of NaN.
      const float ms = mn == -INFINITY ? 0.f : mn * scale_log2;
      corr[r] = grow ? ex2(m[r] * scale_log2 - ms) : 1.f;  // m_old = -inf -> 0
      neg_ms[r] = -ms;
      m[r] = mn;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[4 * j + e] = ex2(fmaf(s[4 * j + e], scale_log2, neg_ms[0]));
        s[4 * j + 2 + e] = ex2(fmaf(s[4 * j + 2 + e], scale_log2, neg_ms[1]));
        sum[0] += s[4 * j + e];
        sum[1] += s[4 * j + 2 + e];
      }
    }
    l[0] = l[0] * corr[0] + sum[0];
    l[1] = l[1] * corr[1] + sum[1];
  }

  // kLazyRescale's tiles after the first, without the row max (its FMNMX
  // and quad shuffles, a fifth of the step's instructions): p = exp2(s *
  // scale_log2 - m * scale_log2) in place against the references as they
  // stand, the tile's partial row sums in sum, m and l untouched. Returns
  // whether this thread's rows may keep their references: every p of the
  // tile <= 2^kStaleLog2, as step() would have it, which the partial sums
  // bound (p >= 0; a NaN sum fails), and a reference to keep (a row without
  // one fails at once). The caller votes; if every thread may keep its
  // references, commit_kept(sum) (corr = 1: no O rescale), else s no longer
  // holds the scores: the caller computes them again for step().
  __device__ __forceinline__ bool exp_kept(float (&s)[kS], float scale_log2, float (&sum)[2]) const {
    static_assert(kLazyRescale, "");
    sum[0] = sum[1] = 0.f;
    if (m[0] == -INFINITY || m[1] == -INFINITY) return false;
    const float neg0 = -(m[0] * scale_log2), neg1 = -(m[1] * scale_log2);
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[4 * j + e] = ex2(fmaf(s[4 * j + e], scale_log2, neg0));
        s[4 * j + 2 + e] = ex2(fmaf(s[4 * j + 2 + e], scale_log2, neg1));
        sum[0] += s[4 * j + e];
        sum[1] += s[4 * j + 2 + e];
      }
    }
    return sum[0] <= kStaleMaxP && sum[1] <= kStaleMaxP;
  }
  __device__ __forceinline__ void commit_kept(const float (&sum)[2]) {
    l[0] += sum[0];
    l[1] += sum[1];
  }

  // With kLazyRescale, skipped when no row of the warp moved its max (a
  // warp-uniform branch: every lane votes).
  __device__ __forceinline__ static void rescale_o(float (&o)[kO], const float (&corr)[2]) {
    if constexpr (kLazyRescale) {
      if (!__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) return;
    }
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      o[4 * j] *= corr[0];
      o[4 * j + 1] *= corr[0];
      o[4 * j + 2] *= corr[1];
      o[4 * j + 3] *= corr[1];
    }
  }

  // Row sums over the quad; inv = 1/l (0 for a row with no visible key, which
  // makes O = 0) and the natural-log LSE (-inf for such a row). Only l == 0
  // means "no key": a NaN l (a NaN or Inf input reached the row's scores) must
  // give a NaN row, as in the reference, not a silently empty one.
  __device__ __forceinline__ void finalize(float scale, float (&inv)[2], float (&lse)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float t = l[r];
      t += __shfl_xor_sync(0xffffffffu, t, 1);
      t += __shfl_xor_sync(0xffffffffu, t, 2);
      const bool empty = t == 0.f;
      inv[r] = empty ? 0.f : 1.f / t;
      lse[r] = empty ? -INFINITY : m[r] * scale + logf(t);
    }
  }
};

}  // namespace flashattn::detail::cuda::sm90
