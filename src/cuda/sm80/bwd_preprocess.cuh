// Backward preprocessing (FlashAttention-2, Algorithm 2 line 4):
// D_i = rowsum(dO_i * O_i) in fp32, one warp per (batch, head, query) row,
// stored [B, Hq, Sq] like the LSE. SEQ (varlen): the packed batch as one
// sequence of total_q rows, D stored [Hq, total_q] like the varlen LSE; rows
// outside [cu_q[0], cu_q[batch]) belong to no sequence and are skipped.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "sm80/kernel_args.hpp"

namespace flashattn::detail::cuda::sm80 {

template <class T, bool SEQ = false>
__global__ void __launch_bounds__(256) bwd_preprocess_kernel(const BwdArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  int i, h, b;
  if constexpr (SEQ) {
    if (row >= a.heads_q * a.total_q) return;
    i = static_cast<int>(row % a.total_q);
    h = static_cast<int>(row / a.total_q);
    b = 0;  // batch strides are 0
    if (i < a.cu_q[0] || i >= a.cu_q[a.batch]) return;
  } else {
    const int64_t total = static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q;
    if (row >= total) return;
    i = static_cast<int>(row % a.seqlen_q);
    const int64_t bh = row / a.seqlen_q;
    h = static_cast<int>(bh % a.heads_q), b = static_cast<int>(bh / a.heads_q);
  }
  const T* o = static_cast<const T*>(a.o.ptr) + b * a.o.sb + static_cast<int64_t>(i) * a.o.ss + h * a.o.sh;
  const T* d = static_cast<const T*>(a.dout.ptr) + b * a.dout.sb + static_cast<int64_t>(i) * a.dout.ss +
               h * a.dout.sh;
  float acc = 0.f;
  for (int c = lane * 8; c < a.d; c += 32 * 8) {
    const uint4 ov = *reinterpret_cast<const uint4*>(o + c);
    const uint4 dv = *reinterpret_cast<const uint4*>(d + c);
    const uint32_t ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 x = unpack2<T>(ow[j]), y = unpack2<T>(dw[j]);
      acc = fmaf(x.x, y.x, acc);
      acc = fmaf(x.y, y.y, acc);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) a.dsum[row] = acc;
}

}  // namespace flashattn::detail::cuda::sm80
