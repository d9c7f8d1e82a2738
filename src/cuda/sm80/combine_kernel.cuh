// Split-KV combine (flash-decoding): each of the nsplit key slices left a
// normalised partial O_s and its LSE_s; with M = max_s LSE_s and
// w_s = exp(LSE_s - M), the seed's rescale rule gives
//   O = sum_s w_s O_s / sum_s w_s,   LSE = M + log(sum_s w_s),
// and a row no slice saw any key for gets O = 0, LSE = -inf.
//
// One block of kCombineWarps warps per output row (batch, head, query):
// thread s reads LSE_s (nsplit <= kMaxSplits <= the block's threads), the
// block reduces M and sum w_s, and warp w sums the slices s = w, w + 8, ...
// with lane l owning the float4 columns 4l + 128k; the warps' sums meet in
// shared memory. A decode step at batch 1 has few rows and many slices
// (64 rows x 64 slices at 8k keys): one warp walking a row's slices one
// after another waited for one L2 round trip per slice. The first
// kPrefetch slices of each warp are loaded before the weights are known, so
// the LSE and O round trips overlap.
//
// On sm_90 the launcher lets this grid start while the attention kernel
// finishes (programmatic dependent launch); griddepcontrol.wait holds every
// read of the partial results until that grid has completed and its writes
// are visible.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "sm80/fwd_args.hpp"
#include "sm80/fwd_plan.hpp"

namespace flashattn::detail::cuda::sm80 {

constexpr int kCombineWarps = 8;
constexpr int kCombineThreads = kCombineWarps * 32;
static_assert(kMaxSplits <= kCombineThreads, "one LSE per thread");
constexpr int kCombineCols = 256;  // head dim <= 256
constexpr int kPrefetch = 8;       // slices per warp loaded up front

// Shared memory: per-slice weights, per-warp column sums, reduction slots.
constexpr size_t kCombineSmem = (kCombineThreads + kCombineWarps * kCombineCols + 2 * kCombineWarps) * sizeof(float);

// Grid of the combine pass over `rows` output rows (batch x heads x max_q).
inline unsigned combine_blocks(int64_t rows) { return static_cast<unsigned>(rows); }

template <class T>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const FwdSeqArgs a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* w = reinterpret_cast<float*>(smem_raw);     // [kCombineThreads]: w_s, 0 past nsplit
  float* part = w + kCombineThreads;                 // [kCombineWarps][kCombineCols]
  float* red = part + kCombineWarps * kCombineCols;  // [2][kCombineWarps]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t row = blockIdx.x;
  const int64_t rows = static_cast<int64_t>(a.batch) * a.heads_q * a.max_q;
  const int i = static_cast<int>(row % a.max_q);
  const int64_t bh = row / a.max_q;
  const int h = static_cast<int>(bh % a.heads_q), b = static_cast<int>(bh / a.heads_q);
  const int64_t q_off = a.cu_q != nullptr ? a.cu_q[b] : 0;
  const int len_q = a.cu_q != nullptr ? a.cu_q[b + 1] - a.cu_q[b] : a.seqlen_q;
  if (i >= len_q) return;  // the whole block: no barrier has run yet
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif

  constexpr int kChunks = kCombineCols / 128;  // float4 columns per lane
  float4 pre[kPrefetch][kChunks];
#pragma unroll
  for (int j = 0; j < kPrefetch; ++j) {
    const int s = warp + j * kCombineWarps;
    const float* os = a.o_accum + (static_cast<int64_t>(s) * rows + row) * a.d;
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int c = 4 * lane + 128 * k;
      pre[j][k] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (s < a.nsplit && c < a.d) pre[j][k] = *reinterpret_cast<const float4*>(os + c);
    }
  }

  // A NaN partial LSE (a non-finite input reached the row) must make the row
  // NaN, so this max propagates NaN where fmaxf would drop it.
  auto nan_max = [](float x, float y) { return (y > x || y != y) ? y : x; };
  const float l = tid < a.nsplit ? a.lse_accum[tid * rows + row] : -INFINITY;
  float mx = l;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = nan_max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
#pragma unroll
  for (int k = 1; k < kCombineWarps; ++k) mx = nan_max(mx, red[k]);
  const float ws = (tid < a.nsplit && mx != -INFINITY) ? expf(l - mx) : 0.f;
  w[tid] = ws;
  float sum = ws;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) red[kCombineWarps + warp] = sum;
  __syncthreads();
  sum = 0.f;
#pragma unroll
  for (int k = 0; k < kCombineWarps; ++k) sum += red[kCombineWarps + k];

  float4 acc[kChunks];
#pragma unroll
  for (int k = 0; k < kChunks; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (mx != -INFINITY) {
#pragma unroll
    for (int j = 0; j < kPrefetch; ++j) {
      const int s = warp + j * kCombineWarps;
      const float ww = s < a.nsplit ? w[s] : 0.f;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        acc[k].x += ww * pre[j][k].x;
        acc[k].y += ww * pre[j][k].y;
        acc[k].z += ww * pre[j][k].z;
        acc[k].w += ww * pre[j][k].w;
      }
    }
#pragma unroll 4
    for (int s = warp + kPrefetch * kCombineWarps; s < a.nsplit; s += kCombineWarps) {
      const float ww = w[s];
      const float* os = a.o_accum + (s * rows + row) * a.d;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        const int c = 4 * lane + 128 * k;
        if (c < a.d) {
          const float4 x = *reinterpret_cast<const float4*>(os + c);
          acc[k].x += ww * x.x;
          acc[k].y += ww * x.y;
          acc[k].z += ww * x.z;
          acc[k].w += ww * x.w;
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int c = 4 * lane + 128 * k;
    if (c < a.d) *reinterpret_cast<float4*>(part + warp * kCombineCols + c) = acc[k];
  }
  __syncthreads();

  const float inv = sum != 0.f ? 1.f / sum : 0.f;
  T* out = static_cast<T*>(const_cast<void*>(a.o.ptr)) + b * a.o.sb + (q_off + i) * a.o.ss +
           static_cast<int64_t>(h) * a.o.sh;
  const int c = 2 * tid;  // two columns per thread (head dim <= kCombineCols)
  if (c < a.d) {
    float x = 0.f, y = 0.f;
#pragma unroll
    for (int k = 0; k < kCombineWarps; ++k) {
      x += part[k * kCombineCols + c];
      y += part[k * kCombineCols + c + 1];
    }
    *reinterpret_cast<uint32_t*>(out + c) = pack2<T>(x * inv, y * inv);
  }
  if (a.lse != nullptr && tid == 0)
    a.lse[b * a.lse_sb + h * a.lse_sh + q_off + i] = sum != 0.f ? mx + logf(sum) : -INFINITY;
}

}  // namespace flashattn::detail::cuda::sm80
