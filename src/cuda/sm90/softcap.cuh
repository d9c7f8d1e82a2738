// Softcap on score tiles of the Hopper kernels: s <- cap * tanh(s * scale /
// cap), applied to raw S = Q K^T accumulators before the softmax (forward)
// or before P is recomputed (backward, which also needs the chain-rule factor
// 1 - tanh^2 for dS).
//
// tanh(x) = 1 - 2 / (2^(2x log2 e) + 1): ex2 and rcp on the MUFU unit, ~2^-21
// accurate in tanh. tanh.approx.f32 (one MUFU op, what FlashAttention-2/3
// use through CUTLASS's fast_tanh) has 2^-11 relative error, which moves a
// logit near a cap of 30-50 by ~0.015-0.025. Large |x| saturates to +-1
// (2^+inf + 1 = inf, rcp(inf) = 0); NaN stays NaN.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "ptx.cuh"

namespace flashattn::detail::cuda::sm90 {

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

__device__ __forceinline__ float2 unpack_half2(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}

}  // namespace flashattn::detail::cuda::sm90
