// Split-KV combine of the Hopper forward: one warp per output row merges the
// row's num_splits partial results (normalised O_s and LSE_s, fp32, written
// by the pieces' epilogues: epilogue.cuh store_partial) by the seed's rescale
// rule: with M = max_s LSE_s and w_s = exp(LSE_s - M),
//   O = sum_s w_s O_s / sum_s w_s,   LSE = M + log(sum_s w_s);
// a row no piece saw a key for gets O = 0 and LSE = -inf, a NaN LSE makes the
// row NaN.
//
// Why not sm80/combine_kernel.cuh: that one is built for decode (few rows,
// up to 128 pieces: a block of 8 warps per row, the pieces spread over the
// warps). The Hopper forward splits only when its query tiles are too few
// for the SMs, so its calls have many rows (a query tile is 128-192 rows)
// and few pieces (floor(SMs / tiles)); a block per row then cost more than
// the split saved (chunk 256 at batch 1, 4k keys: 8,192 rows of 2 pieces,
// bench/NOTES.md). Here lane l holds columns 4l + 128k and the warp walks the
// pieces; the weights of 32 pieces at a time sit one per lane.
//
// Launched with programmatic dependent launch after the attention grid;
// griddepcontrol.wait holds every read until that grid has finished.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_traits.cuh"

namespace flashattn::detail::cuda::sm90 {

struct SplitCombineArgs {
  const float* o_accum;    // [num_splits, rows, d]
  const float* lse_accum;  // [num_splits, rows]; rows = batch * heads_q * max_q
  void* out;               // O (b, h, i) at out + b * o_sb + (cu_q[b] + i) * o_ss + h * o_sh (elements)
  int64_t o_sb, o_ss, o_sh;
  float* lse;              // nullptr, or LSE (b, h, i) at lse + b * lse_sb + h * lse_sh + cu_q[b] + i
  int64_t lse_sb, lse_sh;
  const int* cu_q;         // varlen row offsets (nullptr: padded, offsets 0)
  int batch, heads_q, max_q, d, num_splits;
};

constexpr int kCombineRowWarps = 8;  // rows per block

template <class T>
__global__ void __launch_bounds__(kCombineRowWarps * 32) split_combine_kernel(const SplitCombineArgs a) {
  using E = ElementTraits<T>;
  const int lane = threadIdx.x % 32;
  const int64_t rows = static_cast<int64_t>(a.batch) * a.heads_q * a.max_q;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kCombineRowWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % a.max_q);
  const int64_t bh = row / a.max_q;
  const int h = static_cast<int>(bh % a.heads_q), b = static_cast<int>(bh / a.heads_q);
  const int64_t q_off = a.cu_q != nullptr ? a.cu_q[b] : 0;
  if (a.cu_q != nullptr && i >= a.cu_q[b + 1] - a.cu_q[b]) return;  // past the sequence
  asm volatile("griddepcontrol.wait;\n" ::: "memory");

  // M and sum_s w_s over the pieces, 32 at a time (NaN wins the max).
  auto nan_max = [](float x, float y) { return (y > x || y != y) ? y : x; };
  float mx = -INFINITY;
  for (int s = lane; s < a.num_splits; s += 32) mx = nan_max(mx, a.lse_accum[s * rows + row]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = nan_max(mx, __shfl_xor_sync(0xffffffffu, mx, o));

  constexpr int kChunks = 2;  // 128 columns per chunk, head dim <= 256
  float4 acc[kChunks];
#pragma unroll
  for (int k = 0; k < kChunks; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  float sum = 0.f;
  if (mx != -INFINITY) {
    for (int s0 = 0; s0 < a.num_splits; s0 += 32) {
      const int s = s0 + lane;
      const float w = s < a.num_splits ? expf(a.lse_accum[s * rows + row] - mx) : 0.f;
      sum += w;
      const int n = min(32, a.num_splits - s0);
#pragma unroll 4
      for (int j = 0; j < n; ++j) {
        const float ws = __shfl_sync(0xffffffffu, w, j);
        const float* os = a.o_accum + ((s0 + j) * rows + row) * a.d;
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
          const int c = 4 * lane + 128 * k;
          if (c < a.d) {
            const float4 x = *reinterpret_cast<const float4*>(os + c);
            acc[k].x += ws * x.x;
            acc[k].y += ws * x.y;
            acc[k].z += ws * x.z;
            acc[k].w += ws * x.w;
          }
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  }
  const float inv = sum != 0.f ? 1.f / sum : 0.f;
  auto* out = static_cast<uint16_t*>(a.out) + b * a.o_sb + (q_off + i) * a.o_ss + h * a.o_sh;
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int c = 4 * lane + 128 * k;
    if (c < a.d) {  // d is a multiple of 8: whole 4-column groups
      uint2 v;
      v.x = E::pack(acc[k].x * inv, acc[k].y * inv);
      v.y = E::pack(acc[k].z * inv, acc[k].w * inv);
      *reinterpret_cast<uint2*>(out + c) = v;
    }
  }
  if (a.lse != nullptr && lane == 0) {
    a.lse[b * a.lse_sb + h * a.lse_sh + q_off + i] = sum != 0.f ? mx + logf(sum) : -INFINITY;
  }
}

}  // namespace flashattn::detail::cuda::sm90
