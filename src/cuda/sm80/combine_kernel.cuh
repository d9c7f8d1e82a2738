// Split-KV combine (flash-decoding): each of the nsplit key slices left a
// normalised partial O_s and its LSE_s; with M = max_s LSE_s and
// w_s = exp(LSE_s - M), the seed's rescale rule gives
//   O = sum_s w_s O_s / sum_s w_s,   LSE = M + log(sum_s w_s),
// and a row no slice saw any key for gets O = 0, LSE = -inf. One warp per
// output row (batch, head, query); each lane owns column pairs 2*lane + 64k.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "sm80/fwd_args.hpp"

namespace flashattn::detail::cuda::sm80 {

constexpr int kCombineWarps = 4;

template <class T>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_kernel(const FwdSeqArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kCombineWarps + (threadIdx.x >> 5);
  const int64_t rows = static_cast<int64_t>(a.batch) * a.heads_q * a.max_q;
  if (row >= rows) return;
  const int i = static_cast<int>(row % a.max_q);
  const int64_t bh = row / a.max_q;
  const int h = static_cast<int>(bh % a.heads_q), b = static_cast<int>(bh / a.heads_q);
  const int64_t q_off = a.cu_q != nullptr ? a.cu_q[b] : 0;
  const int len_q = a.cu_q != nullptr ? a.cu_q[b + 1] - a.cu_q[b] : a.seqlen_q;
  if (i >= len_q) return;

  // A NaN partial LSE (a non-finite input reached the row) must make the row
  // NaN, so this max propagates NaN where fmaxf would drop it.
  auto nan_max = [](float x, float y) { return (y > x || y != y) ? y : x; };
  float mx = -INFINITY;
  for (int s = lane; s < a.nsplit; s += 32) mx = nan_max(mx, a.lse_accum[s * rows + row]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = nan_max(mx, __shfl_xor_sync(0xffffffffu, mx, o));

  constexpr int kMaxPairs = 256 / 64;  // head dim <= 256
  float2 acc[kMaxPairs];
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) acc[k] = make_float2(0.f, 0.f);
  float sum = 0.f;
  if (mx != -INFINITY) {
    for (int s = 0; s < a.nsplit; ++s) {
      const float w = expf(a.lse_accum[s * rows + row] - mx);
      sum += w;
      const float* os = a.o_accum + (s * rows + row) * a.d;
#pragma unroll
      for (int k = 0; k < kMaxPairs; ++k) {
        const int c = 2 * lane + 64 * k;
        if (c < a.d) {
          const float2 x = *reinterpret_cast<const float2*>(os + c);
          acc[k].x += w * x.x;
          acc[k].y += w * x.y;
        }
      }
    }
  }
  const float inv = sum != 0.f ? 1.f / sum : 0.f;
  T* out = static_cast<T*>(const_cast<void*>(a.o.ptr)) + b * a.o.sb + (q_off + i) * a.o.ss +
           static_cast<int64_t>(h) * a.o.sh;
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const int c = 2 * lane + 64 * k;
    if (c < a.d) *reinterpret_cast<uint32_t*>(out + c) = pack2<T>(acc[k].x * inv, acc[k].y * inv);
  }
  if (a.lse != nullptr && lane == 0)
    a.lse[b * a.lse_sb + h * a.lse_sh + q_off + i] = sum != 0.f ? mx + logf(sum) : -INFINITY;
}

}  // namespace flashattn::detail::cuda::sm80
