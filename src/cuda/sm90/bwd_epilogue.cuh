// The Hopper backward's dK/dV epilogue (bwd_kernel.cuh at head dims 64/128,
// bwd_kernel_split.cuh at 256): a consumer warpgroup's dK * scale and dV,
// staged in its part of the K and V buffers in the 128-byte swizzled layout
// the tm_dk / tm_dv maps store from, then written by TMA. The caller has
// made sure that no wgmma still reads those buffers.
#pragma once

#include <cstdint>

#include "bwd_kernel_args.hpp"
#include "bwd_traits.cuh"
#include "ptx.cuh"

namespace flashattn::detail::cuda::sm90 {

// This thread's accumulator rows krow and krow + 8 (keys of the CTA), its
// columns 8j + 2t4 (+1) of atom columns atom0, atom0 + 1, ... (64 columns
// each) of the K/V buffers.
template <class T, int kCols>
__device__ __forceinline__ void stage_dkdv(const BwdSmem<T>& sm, const float (&dk)[kCols / 2],
                                           const float (&dv)[kCols / 2], int krow, int t4, int atom0,
                                           float scale) {
  using E = ElementTraits<typename T::Element>;
  fence_proxy_async_smem();  // wgmma reads (async proxy) -> st.shared
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = krow + 8 * hh;
      const uint32_t off = (atom0 + j / 8) * T::kBlockN * 128 + row * 128 +
                           ((static_cast<uint32_t>(j % 8) ^ (row % 8)) << 4) + t4 * 4;
      st_shared_u32(sm.k() + off, E::pack(dk[4 * j + 2 * hh] * scale, dk[4 * j + 2 * hh + 1] * scale));
      st_shared_u32(sm.v() + off, E::pack(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]));
    }
  }
  fence_proxy_async_smem();  // st.shared -> the TMA engine's reads
}

// One thread, after the warpgroup's stage_dkdv (and a barrier over it):
// boxes of 64 keys from buffer row row0 (key key0 of the sequence) by 64
// columns, atom columns atom0 .. atom0 + atoms - 1, those that start inside
// dK's (head_dim) or dV's (head_dim_v) columns. The maps drop rows past
// seqlen_k and columns past their head dim; the wait keeps shared memory
// alive until the copies have read it.
template <class T>
__device__ __forceinline__ void store_dkdv(const BwdKernelArgs& a, const BwdSmem<T>& sm, int row0, int key0,
                                           int hk, int map_b, int atom0, int atoms) {
#pragma unroll
  for (int at = atom0; at < atom0 + atoms; ++at) {
    const uint32_t box = at * T::kBlockN * 128 + row0 * 128;
    if (at * 64 < a.head_dim) tma_store_4d(&a.tm_dk, sm.k() + box, at * 64, key0, hk, map_b);
    if (at * 64 < a.head_dim_v) tma_store_4d(&a.tm_dv, sm.v() + box, at * 64, key0, hk, map_b);
  }
  tma_store_commit();
  tma_store_wait_read();
}

}  // namespace flashattn::detail::cuda::sm90
