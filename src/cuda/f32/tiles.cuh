// Building blocks of the fp32 CUDA kernels (f32/fwd_kernel.cuh,
// f32/bwd_kernel.cuh): exact fp32 attention on the CUDA cores (FFMA), for
// callers who pass float32 tensors and expect float32 accuracy. Tensor cores
// would round the inputs to tf32 (10 mantissa bits); DESIGN.md allows that
// only when asked, so these kernels never use them.
//
// One thread layout everywhere: 128 threads; thread t has ty = t / 8 (0..15)
// and tx = t % 8. In a score tile (rows x columns, e.g. queries x keys) the
// thread holds rows ty + 16 i and columns tx + 8 c: the 8 threads of a row
// are 8 neighbouring lanes (a row max or sum is three xor shuffles), and the
// 8 rows a warp reads at once from a tile padded by 4 floats per row fall in
// different banks. In an accumulator tile (rows x head dim) it holds rows
// ty + 16 i and head-dim columns 4 tx + 32 j + e: each float4 of a row of V
// (or dO, Q, K) that the warp reads is one contiguous 128-byte line.
#pragma once

#include <cstdint>

#include "common/mask.hpp"
#include "common/philox.hpp"
#include "common/ptx.cuh"
#include "f32/tile_sizes.hpp"

namespace flashattn::detail::cuda::f32 {

struct Lane {
  int ty, tx;
};
__device__ __forceinline__ Lane lane_of(int t) { return {t / kColThreads, t % kColThreads}; }

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }

__device__ __forceinline__ float dot4(float acc, const float4& a, const float4& b) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// acc[i][c] += sum_k A[ty + 16 i][k] * B[tx + 8 c][k], k < klen (a multiple
// of 4): a score tile from two row-major shared tiles (Q K^T, dO V^T, and
// the backward's K Q^T, V dO^T).
template <int RM, int CN>
__device__ __forceinline__ void dot_nt(float (&acc)[RM][CN], const float* sA, int lda, const float* sB, int ldb,
                                       int klen, Lane l) {
#pragma unroll 2
  for (int k = 0; k < klen; k += 4) {
    float4 a[RM], b[CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) a[i] = ld4(sA + (l.ty + kRowThreads * i) * lda + k);
#pragma unroll
    for (int c = 0; c < CN; ++c) b[c] = ld4(sB + (l.tx + kColThreads * c) * ldb + k);
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int c = 0; c < CN; ++c) acc[i][c] = dot4(acc[i][c], a[i], b[c]);
  }
}

// acc[i][4 j + e] += sum_c P[ty + 16 i][c] * V[c][4 tx + 32 j + e], c < n (a
// multiple of 4): P V, and the backward's P^T dO, dS^T Q and dS K.
template <int RM, int DW>
__device__ __forceinline__ void accum_pv(float (&acc)[RM][DW], const float* sP, int ldp, int n, const float* sV,
                                         int ldv, Lane l) {
  constexpr int DG = DW / 4;
  for (int c = 0; c < n; c += 4) {
    float4 p[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i) p[i] = ld4(sP + (l.ty + kRowThreads * i) * ldp + c);
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      float4 v[DG];
#pragma unroll
      for (int j = 0; j < DG; ++j) v[j] = ld4(sV + (c + cc) * ldv + 4 * l.tx + 32 * j);
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float pc = cc == 0 ? p[i].x : cc == 1 ? p[i].y : cc == 2 ? p[i].z : p[i].w;
#pragma unroll
        for (int j = 0; j < DG; ++j) {
          acc[i][4 * j + 0] = fmaf(pc, v[j].x, acc[i][4 * j + 0]);
          acc[i][4 * j + 1] = fmaf(pc, v[j].y, acc[i][4 * j + 1]);
          acc[i][4 * j + 2] = fmaf(pc, v[j].z, acc[i][4 * j + 2]);
          acc[i][4 * j + 3] = fmaf(pc, v[j].w, acc[i][4 * j + 3]);
        }
      }
    }
  }
}

// Copies `rows` rows of `d` floats (row r at row_ptr(r)) into a shared tile
// of `tile_rows` x `cols` with row pitch ld, asynchronously (cp.async;
// complete after cp_async_wait and a barrier). Rows past `rows` and columns
// past d are zero-filled without a read, so the products above need no
// bounds; `any` is a valid address to name in the copies that read nothing.
// d, the pitch and every row address are multiples of 4 floats (the
// dispatch checks 16-byte alignment).
template <class RowPtr>
__device__ __forceinline__ void load_tile_async(float* s, int ld, int tile_rows, int cols, int rows, int d,
                                                const void* any, RowPtr row_ptr) {
  const int per_row = cols / 4;
  for (int idx = threadIdx.x; idx < tile_rows * per_row; idx += kThreads) {
    const int r = idx / per_row, c = 4 * (idx % per_row);
    const bool pred = r < rows && c < d;
    cp_async_16(s + r * ld + c, pred ? static_cast<const void*>(row_ptr(r) + c) : any, pred);
  }
}

// load_tile_async for rows `stride` floats apart from `first` (every tile
// but a paged cache's), COLS the tile head dim: a thread's column is fixed
// and its rows step by kThreads / (COLS / 4), so each copy's address is one
// add (ncu: the general loader's per-copy row and 64-bit offset arithmetic
// was a third of the forward's non-FFMA instructions).
template <int COLS>
__device__ __forceinline__ void load_rows_async(float* s, int ld, int tile_rows, int rows, int d, const float* first,
                                                int64_t stride) {
  constexpr int per_row = COLS / 4;
  static_assert(kThreads % per_row == 0, "a thread's column must stay fixed");
  constexpr int step = kThreads / per_row;
  const int c = 4 * (threadIdx.x % per_row);
  int r = threadIdx.x / per_row;
  const float* src = first + r * stride + c;
  for (; r < tile_rows; r += step, src += step * stride) {
    const bool pred = r < rows && c < d;
    cp_async_16(s + r * ld + c, pred ? src : first, pred);
  }
}

// Row sum / max over the 8 threads of a row.
__device__ __forceinline__ float row_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x + __shfl_xor_sync(0xffffffffu, x, 4);
}
__device__ __forceinline__ float row_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
}

// The score of one (query, key) in natural units, as every backend defines
// it (flashattn.hpp): softcap(scale q.k) - slope |i + len_k - len_q - j|,
// and d score / d (q.k) for the backward.
struct ScoreRule {
  float scale, softcap, cap_scale;  // cap_scale = scale / softcap
  float slope;                      // ALiBi slope of this (batch, head); 0 = off
  int64_t diag;                     // len_k - len_q

  // Neither softcap nor ALiBi: the score is raw * scale.
  __device__ __forceinline__ bool plain() const { return softcap <= 0.f && slope == 0.f; }

  __device__ __forceinline__ float score(float raw, int64_t i, int64_t j, float* dscore = nullptr) const {
    float s = raw * scale;
    if (softcap > 0.f) {
      const float t = tanhf(raw * cap_scale);
      s = softcap * t;
      if (dscore != nullptr) *dscore = scale * (1.f - t * t);
    } else if (dscore != nullptr) {
      *dscore = scale;
    }
    if (slope != 0.f) {
      const int64_t dist = i + diag - j;
      s -= slope * static_cast<float>(dist < 0 ? -dist : dist);
    }
    return s;
  }
};

// Dropout's keep decision for (query i, key j) of generator row bh
// (common/philox.hpp's layout: one Philox call covers keys 4 (j / 4) .. + 3).
__device__ __forceinline__ bool keeps(const DropoutRng& rng, uint32_t bh, int64_t i, int64_t j) {
  const uint32_t ctr[4] = {static_cast<uint32_t>(j >> 2), static_cast<uint32_t>(i), bh, rng.off_lo};
  uint32_t r[4];
  Philox4x32::generate(ctr, rng.key, r);
  return r[j & 3] >= rng.threshold;
}

}  // namespace flashattn::detail::cuda::f32
