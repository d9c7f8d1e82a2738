// Online softmax in registers (FlashAttention-2, Algorithm 1 lines 8-10):
// running row max m and row sum l, the output accumulator rescaled by
// 2^(m_old - m_new) whenever the max grows, normalised once at the end.
//
// Each thread holds, per 16-row m-tile, rows g and g+8 (C-fragment layout);
// the 4 threads of a quad share a row, so row reductions are 2 shuffles.
// Exponents are exp2(s * mult - m * mult) = one FFMA + one MUFU.EX2 per score.
#pragma once

#include <cmath>

#include "common/ptx.cuh"

namespace flashattn::detail::cuda::sm80 {

template <int MT, int NT>  // NT n-tiles of 8 scores
struct OnlineSoftmax {
  float m[MT][2];  // running max of raw scores (-inf: nothing seen yet)
  float l[MT][2];  // this thread's part of the running sum

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m[mt][h] = -INFINITY;
        l[mt][h] = 0.f;
      }
  }

  // s: scores of one key tile (masked ones -inf), replaced by p = exp(s - m).
  // o: output accumulator (DT n-tiles) rescaled to the new max.
  template <int DT>
  __device__ __forceinline__ void step(float (&s)[MT][NT][4], float (&o)[MT][DT][4], float mult) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = m[mt][h];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // A row with every score masked so far keeps max -inf; exponentiate
        // against 0 so that exp2(-inf - 0) = 0 instead of NaN.
        const float ms = mx == -INFINITY ? 0.f : mx * mult;
        const float alpha = fast_exp2(m[mt][h] * mult - ms);
        m[mt][h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = fast_exp2(fmaf(s[mt][nt][2 * h + e], mult, -ms));
            s[mt][nt][2 * h + e] = p;
            sum += p;
          }
        }
        l[mt][h] = l[mt][h] * alpha + sum;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          o[mt][dt][2 * h] *= alpha;
          o[mt][dt][2 * h + 1] *= alpha;
        }
      }
    }
  }

  // Normalise o; returns the natural-log LSE per row (-inf for empty rows,
  // whose o is then 0). Only sum == 0 means empty: a NaN sum (a non-finite
  // input reached the row) gives a NaN row, as in the reference.
  template <int DT>
  __device__ __forceinline__ void finish(float (&o)[MT][DT][4], float mult, float (&lse)[MT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = l[mt][h];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const bool any = sum != 0.f;
        const float inv = any ? 1.f / sum : 0.f;
        lse[mt][h] = any ? (m[mt][h] * mult + __log2f(sum)) * 0.6931471805599453f : -INFINITY;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          o[mt][dt][2 * h] *= inv;
          o[mt][dt][2 * h + 1] *= inv;
        }
      }
    }
  }
};

}  // namespace flashattn::detail::cuda::sm80
