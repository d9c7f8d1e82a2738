// Backward postprocessing for the atomic dQ path: dQ = scale * dQaccum,
// converted from the fp32 workspace [B, Hq, Sq, Dtile] to the dtype and
// written through dq's strides. One thread per 8 elements. SEQ (varlen):
// the accumulator is [Hq, total_q, Dtile]; rows outside [cu_q[0],
// cu_q[batch]) belong to no sequence and are left untouched in dq.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "sm80/kernel_args.hpp"

namespace flashattn::detail::cuda::sm80 {

template <class T, bool SEQ = false>
__global__ void __launch_bounds__(256) bwd_dq_convert_kernel(const BwdArgs a, int dtile) {
  const int cpr = a.d / 8;  // chunks per row
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int c, i, h, b;
  int64_t row;
  if constexpr (SEQ) {
    if (idx >= a.heads_q * a.total_q * cpr) return;
    c = static_cast<int>(idx % cpr) * 8;
    row = idx / cpr;  // (h, packed row i) in [Hq, total_q] order
    i = static_cast<int>(row % a.total_q);
    h = static_cast<int>(row / a.total_q);
    b = 0;  // batch strides are 0
    if (i < a.cu_q[0] || i >= a.cu_q[a.batch]) return;
  } else {
    const int64_t total = static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q * cpr;
    if (idx >= total) return;
    c = static_cast<int>(idx % cpr) * 8;
    row = idx / cpr;  // (b, h, i) in [B, Hq, Sq] order
    i = static_cast<int>(row % a.seqlen_q);
    const int64_t bh = row / a.seqlen_q;
    h = static_cast<int>(bh % a.heads_q), b = static_cast<int>(bh / a.heads_q);
  }
  const float4* src = reinterpret_cast<const float4*>(a.dq_accum + row * dtile + c);
  const float4 x = src[0], y = src[1];
  uint4 out;
  out.x = pack2<T>(x.x * a.scale, x.y * a.scale);
  out.y = pack2<T>(x.z * a.scale, x.w * a.scale);
  out.z = pack2<T>(y.x * a.scale, y.y * a.scale);
  out.w = pack2<T>(y.z * a.scale, y.w * a.scale);
  T* dst = static_cast<T*>(const_cast<void*>(a.dq.ptr)) + b * a.dq.sb + static_cast<int64_t>(i) * a.dq.ss +
           h * a.dq.sh + c;
  *reinterpret_cast<uint4*>(dst) = out;
}

}  // namespace flashattn::detail::cuda::sm80
