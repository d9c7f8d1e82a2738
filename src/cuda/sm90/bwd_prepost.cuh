// The Hopper backward's two helper kernels.
//
// Preprocess: per (batch, query head, row) of the padded row range, D =
// rowsum(dO * O) and LSE * log2(e), and the row of the fp32 dQ accumulator
// zeroed, written [B, Hq, seqlen_q_pad] so that the
// main kernel reads a query tile's block_m values of each, aligned and in
// bounds, without per-row checks (the sm80 preprocess writes D unpadded and
// leaves the LSE in the caller's [B, Hq, Sq] buffer). Padding
// rows and rows that saw no key (LSE = -inf) get +inf, which makes their P
// (and so dS) exactly 0.
// Postprocess: dQ = scale * dQaccum, fp32 [B, Hq, Sqp, dq_stride] -> the
// dtype through dq's strides.
// Varlen (kVarlen): the workspace rows are [Hq, ws_head_rows] with sequence
// b's at bwd_varlen_row0 (bwd_kernel_args.hpp); a row finds its sequence by
// a binary search over cu_seqlens_q, and the rows between sequences are
// padding rows like those past seqlen_q.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "bwd_kernel_args.hpp"

namespace flashattn::detail::cuda::sm90 {

template <class T>
__device__ __forceinline__ float2 to_float2(uint32_t w);
template <>
__device__ __forceinline__ float2 to_float2<__nv_bfloat16>(uint32_t w) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
}
template <>
__device__ __forceinline__ float2 to_float2<__half>(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}
template <class T>
__device__ __forceinline__ uint32_t from_float2(float x, float y);
template <>
__device__ __forceinline__ uint32_t from_float2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t from_float2<__half>(float x, float y) {
  __half2 v = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&v);
}

// A group of bwd_prep_lanes(kHeadDim) lanes per padded row (one 16-byte load of O and of
// dO per lane; dispatch checked the alignment), 32 / group rows per warp. The
// group also zeroes the row of the fp32 dQ accumulator, in place of a
// separate memset of it. (One warp per row, as before, left 3/4 of the lanes
// idle at head dim 64 and took 139 us for the grid's 16k tokens x 2048
// hidden, twice head dim 128's 71 us, on top of a ~45 us memset; H200.)
// Varlen: the sequence b (0 .. batch - 1) whose workspace rows begin at or
// before row rr of a head (bwd_varlen_row0 is increasing in b).
__device__ __forceinline__ int varlen_seq_of_ws_row(const BwdPrepArgs& a, int64_t rr) {
  int lo = 0, hi = a.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (bwd_varlen_row0(a.cu_seqlens_q[mid], mid, a.block_m) <= rr) lo = mid; else hi = mid - 1;
  }
  return lo;
}
// Varlen: the sequence holding packed row t (the last b with cu_seqlens_q[b]
// <= t; zero-length sequences share their start with the next one).
__device__ __forceinline__ int varlen_seq_of_token(const BwdPrepArgs& a, int64_t t) {
  int lo = 0, hi = a.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (a.cu_seqlens_q[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

template <class T, int kHeadDim, bool kVarlen = false>
__global__ void __launch_bounds__(256) bwd_sm90_preprocess(const BwdPrepArgs a) {
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kGroup = bwd_prep_lanes(kHeadDim);  // lanes per row
  static_assert(kGroup >= kHeadDim / 8 && kGroup <= 32 && 32 % kGroup == 0, "");
  const int dq_chunks = a.dq_stride / 4;  // float4s per accumulator row
  const int lane = threadIdx.x & 31, g = lane % kGroup;
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kGroup;
  const int64_t total = kVarlen ? a.heads_q * a.ws_head_rows
                                : static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q_pad;
  // Every lane of a warp takes part in the shuffles below; rows past the end
  // (only in the last warp) compute on clamped indices and write nothing.
  const bool valid = row < total;
  const int64_t r = valid ? row : total - 1;
  // This row's query i of head h in sequence b; its O / dO row and LSE index.
  int i, h, len;
  int64_t o_row, do_row, lse_idx;
  if constexpr (kVarlen) {
    h = static_cast<int>(r / a.ws_head_rows);
    const int64_t rr = r % a.ws_head_rows;
    const int b = varlen_seq_of_ws_row(a, rr);
    const int q0 = a.cu_seqlens_q[b];
    len = a.cu_seqlens_q[b + 1] - q0;
    const int64_t di = rr - bwd_varlen_row0(q0, b, a.block_m);
    i = di < len ? static_cast<int>(di) : len;  // len: a padding row
    o_row = (q0 + static_cast<int64_t>(i)) * a.o_ss + h * a.o_sh;
    do_row = (q0 + static_cast<int64_t>(i)) * a.do_ss + h * a.do_sh;
    lse_idx = h * a.lse_sh + q0 + i;
  } else {
    i = static_cast<int>(r % a.seqlen_q_pad);
    const int64_t bh = r / a.seqlen_q_pad;
    h = static_cast<int>(bh % a.heads_q);
    const int b = static_cast<int>(bh / a.heads_q);
    len = a.seqlen_q;
    o_row = b * a.o_sb + static_cast<int64_t>(i) * a.o_ss + h * a.o_sh;
    do_row = b * a.do_sb + static_cast<int64_t>(i) * a.do_ss + h * a.do_sh;
    lse_idx = bh * a.seqlen_q + i;
  }
  if (valid) {
    float4* acc = reinterpret_cast<float4*>(a.dq_accum + r * a.dq_stride);
    for (int c = g; c < dq_chunks; c += kGroup) acc[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float sum = 0.f;
  const bool real = i < len;
  if (real && 8 * g < a.cols_o) {  // the tile's columns past O's (and spare lanes) add nothing
    const T* o = static_cast<const T*>(a.o) + o_row + 8 * g;
    const T* d = static_cast<const T*>(a.dout) + do_row + 8 * g;
    const uint4 ov = *reinterpret_cast<const uint4*>(o);
    const uint4 dv = *reinterpret_cast<const uint4*>(d);
    const uint32_t ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 x = to_float2<T>(ow[j]), y = to_float2<T>(dw[j]);
      sum = fmaf(x.x, y.x, sum);
      sum = fmaf(x.y, y.y, sum);
    }
  }
#pragma unroll
  for (int off = kGroup / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (valid && g == 0) {
    if (real) {
      const float lse = a.lse[lse_idx];
      a.dsum[r] = sum;
      a.lse2[r] = lse == -INFINITY ? INFINITY : lse * kLog2e;
    } else {
      a.dsum[r] = 0.f;
      a.lse2[r] = INFINITY;
    }
  }
}

// One thread per 8 elements of dQ (varlen: in packed-row order, [total_q,
// Hq, D]).
template <class T, bool kVarlen = false>
__global__ void __launch_bounds__(256) bwd_sm90_postprocess(const BwdPrepArgs a) {
  const int cpr = a.cols / 8;  // the workspace rows are a.head_dim (the tile's) wide
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = (kVarlen ? a.total_q * a.heads_q : static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q) * cpr;
  if (idx >= total) return;
  const int c = static_cast<int>(idx % cpr) * 8;
  const int64_t row = idx / cpr;
  int i, h;
  int64_t ws_row0;  // workspace row of this (sequence, head)'s query 0
  T* dst = static_cast<T*>(a.dq) + c;
  if constexpr (kVarlen) {
    h = static_cast<int>(row % a.heads_q);
    const int64_t t = row / a.heads_q;
    const int b = varlen_seq_of_token(a, t);
    const int q0 = a.cu_seqlens_q[b];
    i = static_cast<int>(t - q0);
    ws_row0 = h * a.ws_head_rows + bwd_varlen_row0(q0, b, a.block_m);
    dst += t * a.dq_ss + h * a.dq_sh;
  } else {
    i = static_cast<int>(row % a.seqlen_q);
    const int64_t bh = row / a.seqlen_q;
    h = static_cast<int>(bh % a.heads_q);
    const int b = static_cast<int>(bh / a.heads_q);
    ws_row0 = bh * a.seqlen_q_pad;
    dst += b * a.dq_sb + static_cast<int64_t>(i) * a.dq_ss + h * a.dq_sh;
  }
  float4 x, y;
  if (bwd_split_head_dim(a.head_dim)) {  // the tile's permuted block
    const float* tile = a.dq_accum + (ws_row0 + i / 64 * 64) * a.head_dim;
    x = *reinterpret_cast<const float4*>(tile + bwd_dq_split_offset(i % 64, c, a.head_dim));
    y = *reinterpret_cast<const float4*>(tile + bwd_dq_split_offset(i % 64, c + 4, a.head_dim));
  } else {
    const float4* src = reinterpret_cast<const float4*>(
        a.dq_accum + (ws_row0 + i) * a.dq_stride + c);
    x = src[0];
    y = src[1];
  }
  uint4 out;
  out.x = from_float2<T>(x.x * a.scale, x.y * a.scale);
  out.y = from_float2<T>(x.z * a.scale, x.w * a.scale);
  out.z = from_float2<T>(y.x * a.scale, y.y * a.scale);
  out.w = from_float2<T>(y.z * a.scale, y.w * a.scale);
  *reinterpret_cast<uint4*>(dst) = out;
}

}  // namespace flashattn::detail::cuda::sm90
