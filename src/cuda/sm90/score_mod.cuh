// Score modifications of the Hopper kernels' score-mod instantiations
// (kMod != 0): softcap and ALiBi, applied to raw S = Q K^T accumulators
// before the softmax (forward) or before P is recomputed (backward). Either
// way the scores leave here in natural units (scaled), and the softmax / P
// take them with scale 1 (log2 e per unit), as the CPU and sm80 paths define
// them: s <- cap * tanh(s * scale / cap) (or s * scale without a cap), then
// s <- s - slope(b, h) * |i + seqlen_k - seqlen_q - j|.
//
// tanh(x) = 1 - 2 / (2^(2x log2 e) + 1): ex2 and rcp on the MUFU unit, ~2^-21
// accurate in tanh. tanh.approx.f32 (one MUFU op, what FlashAttention-2/3
// use through CUTLASS's fast_tanh) has 2^-11 relative error, which moves a
// logit near a cap of 30-50 by ~0.015-0.025. Large |x| saturates to +-1
// (2^+inf + 1 = inf, rcp(inf) = 0); NaN stays NaN.
//
// ALiBi distances are formed in fp32 from a per-thread base and the
// element's constant column offset: exact below 2^24 positions.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "ptx.cuh"

namespace flashattn::detail::cuda::sm90 {

// The kMod template argument of the score-mod kernels: a bit per
// modification, so that each combination compiles only its own work (with
// run-time switches between them the backward's consumers spilled).
constexpr int kModSoftcap = 1, kModAlibi = 2;
constexpr int score_mod_bits(bool softcap, bool alibi) {
  return (softcap ? kModSoftcap : 0) | (alibi ? kModAlibi : 0);
}

// tanh(y / (2 log2 e)), i.e. tanh(x) for y = 2 x log2 e.
__device__ __forceinline__ float tanh_of_scaled(float y) {
  return fmaf(-2.f, rcp_approx(ex2(y) + 1.f), 1.f);
}

template <int kN>
__device__ __forceinline__ void apply_softcap(float (&s)[kN], float softcap, float cap_scale) {
  const float k = 2.f * 1.4426950408889634f * cap_scale;
#pragma unroll
  for (int i = 0; i < kN; ++i) s[i] = softcap * tanh_of_scaled(s[i] * k);
}

// The backward's form: also g = 1 - tanh^2 for each score, packed two per
// register as fp16 (g is in [0, 1]; dS = P (dP - D) g is rounded to 16 bits
// anyway), g[i / 2] holding scores i and i + 1 (i even).
template <int kN>
__device__ __forceinline__ void apply_softcap_grad(float (&s)[kN], uint32_t (&g)[kN / 2], float softcap,
                                                   float cap_scale) {
  const float k = 2.f * 1.4426950408889634f * cap_scale;
#pragma unroll
  for (int i = 0; i < kN; i += 2) {
    const float t0 = tanh_of_scaled(s[i] * k), t1 = tanh_of_scaled(s[i + 1] * k);
    s[i] = softcap * t0;
    s[i + 1] = softcap * t1;
    const __half2 h = __floats2half2_rn(fmaf(-t0, t0, 1.f), fmaf(-t1, t1, 1.f));
    g[i / 2] = *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Scores to natural units without a cap.
template <int kN>
__device__ __forceinline__ void scale_scores(float (&s)[kN], float scale) {
#pragma unroll
  for (int i = 0; i < kN; ++i) s[i] *= scale;
}

// ALiBi on a forward S tile (rows are queries; the wgmma accumulator layout
// of softmax.cuh): s[4j + e] is (row r, column 8j + e) and s[4j + 2 + e] is
// (row r + 8, same column) relative to rel = r + offset - (c0 + 2 (lane % 4)),
// the distance being |rel - 8j - e| and |rel + 8 - 8j - e|.
template <int kN>
__device__ __forceinline__ void add_alibi_rows(float (&s)[kN], float neg_slope, float rel) {
#pragma unroll
  for (int j = 0; j < kN / 4; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float c = static_cast<float>(8 * j + e);
      s[4 * j + e] = fmaf(neg_slope, fabsf(rel - c), s[4 * j + e]);
      s[4 * j + 2 + e] = fmaf(neg_slope, fabsf(rel + 8.f - c), s[4 * j + 2 + e]);
    }
  }
}

// ALiBi on a backward S^T tile (rows are keys): s[4j + 2hh + e] is (key k0 +
// 8hh, query q0 + 8j + e) for base = q0 + offset - k0, the distance being
// |base + 8j + e - 8hh|.
template <int kN>
__device__ __forceinline__ void add_alibi_cols(float (&s)[kN], float neg_slope, float base) {
#pragma unroll
  for (int j = 0; j < kN / 4; ++j) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = 4 * j + 2 * hh + e;
        s[i] = fmaf(neg_slope, fabsf(base + static_cast<float>(8 * j + e - 8 * hh)), s[i]);
      }
    }
  }
}

// All of kMod's modifications, in order, on a forward S tile (alibi_rel as
// add_alibi_rows's rel) or a backward S^T tile (g: softcap's 1 - tanh^2;
// alibi_base as add_alibi_cols's base). Args: KernelArgs / BwdKernelArgs.
template <int kMod, int kN, class Args>
__device__ __forceinline__ void modify_scores_fwd(float (&s)[kN], const Args& a, float neg_slope,
                                                  float alibi_rel) {
  if constexpr ((kMod & kModSoftcap) != 0) {
    apply_softcap(s, a.softcap, a.cap_scale);
  } else if constexpr (kMod != 0) {
    scale_scores(s, a.scale);
  }
  if constexpr ((kMod & kModAlibi) != 0) add_alibi_rows(s, neg_slope, alibi_rel);
}
template <int kMod, int kN, class Args>
__device__ __forceinline__ void modify_scores_bwd(float (&s)[kN], uint32_t (&g)[kN / 2], const Args& a,
                                                  float neg_slope, float alibi_base) {
  if constexpr ((kMod & kModSoftcap) != 0) {
    apply_softcap_grad(s, g, a.softcap, a.cap_scale);
  } else if constexpr (kMod != 0) {
    scale_scores(s, a.scale);
  }
  if constexpr ((kMod & kModAlibi) != 0) add_alibi_cols(s, neg_slope, alibi_base);
}

__device__ __forceinline__ float2 unpack_half2(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}

}  // namespace flashattn::detail::cuda::sm90
