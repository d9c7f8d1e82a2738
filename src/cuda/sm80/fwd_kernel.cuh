// FlashAttention-2 forward (Dao, "FlashAttention-2", 2023, Algorithm 1 and
// section 3.1-3.2): one block per (BM query rows, head, batch), looping over
// key/value tiles; S = Q K^T and O += P V on mma.sync, the online softmax in
// registers, never writing S or P to memory. Each warp owns BM/NW whole rows,
// so no cross-warp reduction is needed.
//
// Pipeline (one buffer each for K and V): while S = Q K_j^T runs, V_j is in
// flight; while the softmax and O += P V_j run, K_{j+1} is in flight.
// Causal / window: key tiles no row of the block sees are never visited, and
// the per-element mask runs only on tiles the mask cuts (tile_full false),
// which includes the seqlen_k tail tile.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "common/ptx.cuh"
#include "common/smem_tile.cuh"
#include "common/warp_mma.cuh"
#include "sm80/kernel_args.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/softmax.cuh"

namespace flashattn::detail::cuda::sm80 {

// Scores of one tile in C-fragment layout for rows r_base + 16mt + g (+8):
// softcap, then -inf where the mask hides the key (columns c0 + 8nt + 2t + e).
template <int MT, int NT>
__device__ __forceinline__ void fwd_score_mod(float (&s)[MT][NT][4], const AttnArgs& a, int r_base, int c0,
                                              bool full, int lane) {
  if (a.softcap > 0.f) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = a.softcap * tanhf(s[mt][nt][e] * a.cap_scale);
  }
  if (full) return;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const KeyRange kr = a.mask.keys(r_base + mt * 16 + g + 8 * h);
      const int lo = static_cast<int>(kr.begin - c0), hi = static_cast<int>(kr.end - c0);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + 2 * t + e;
          if (col < lo || col >= hi) s[mt][nt][2 * h + e] = -INFINITY;
        }
    }
  }
}

template <class T, int D>
__global__ void __launch_bounds__(FwdCfg<D>::NW * 32) fwd_kernel(const FwdArgs a) {
  using Cfg = FwdCfg<D>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, NW = Cfg::NW, NTHREADS = NW * 32;
  constexpr int MT = BM / (16 * NW);  // m-tiles per warp
  constexpr int NT = BN / 8;          // score n-tiles
  constexpr int DT = D / 8;           // output n-tiles
  static_assert(BM % (16 * NW) == 0 && BN % 16 == 0 && D % 16 == 0, "tile shape");
  using LQ = SmemLayout<BM, D>;
  using LK = SmemLayout<BN, D>;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + LQ::kSize;
  T* sV = sK + LK::kSize;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Heaviest (causal: last) query blocks first.
  const int m_block = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / a.group;
  const int r0 = m_block * BM;
  const int rows = min(BM, a.seqlen_q - r0);

  const T* qbase = static_cast<const T*>(a.q.ptr);
  const T* kbase = static_cast<const T*>(a.k.ptr);
  const T* vbase = static_cast<const T*>(a.v.ptr);
  const T* gQ = qbase + b * a.q.sb + static_cast<int64_t>(r0) * a.q.ss + h * a.q.sh;
  const T* gK = kbase + b * a.k.sb + hk * a.k.sh;
  const T* gV = vbase + b * a.v.sb + hk * a.v.sh;

  const KeyRange kr = a.mask.keys(r0, r0 + rows);
  int n_begin = 0, n_end = 0;
  if (!kr.empty()) {
    n_begin = static_cast<int>(kr.begin / BN);
    n_end = static_cast<int>((kr.end + BN - 1) / BN);
  }

  load_tile_async<LQ, NTHREADS>(sQ, gQ, a.q.ss, rows, a.d, qbase, tid);
  cp_async_commit();
  if (n_begin < n_end) {
    const int c0 = n_begin * BN;
    load_tile_async<LK, NTHREADS>(sK, gK + static_cast<int64_t>(c0) * a.k.ss, a.k.ss, a.seqlen_k - c0, a.d, kbase,
                                  tid);
  }
  cp_async_commit();

  float o[MT][DT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
  OnlineSoftmax<MT, NT> sm;
  sm.init();
  const int wrow = warp * MT * 16;  // this warp's first row in the tile

  for (int n = n_begin; n < n_end; ++n) {
    const int c0 = n * BN;
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

    cp_async_wait<0>();  // K_n (and Q) landed
    __syncthreads();     // ... for every thread; every warp is done with V_{n-1}
    load_tile_async<LK, NTHREADS>(sV, gV + static_cast<int64_t>(c0) * a.v.ss, a.v.ss, a.seqlen_k - c0, a.d, vbase,
                                  tid);
    cp_async_commit();

    gemm_ss<MT, NT, D / 16, false, false, LQ, LK>(s, sQ, wrow, sK, 0, lane);
    const bool full = a.mask.tile_full(r0, r0 + rows, c0, c0 + BN);
    fwd_score_mod(s, a, r0 + wrow, c0, full, lane);

    cp_async_wait<0>();  // V_n landed
    __syncthreads();     // ... and every warp is done with K_n
    if (n + 1 < n_end) {
      const int c1 = c0 + BN;
      load_tile_async<LK, NTHREADS>(sK, gK + static_cast<int64_t>(c1) * a.k.ss, a.k.ss, a.seqlen_k - c1, a.d,
                                    kbase, tid);
    }
    cp_async_commit();

    sm.step(s, o, a.mult);
    uint32_t p[MT][NT / 2][4];
    c_to_a<T>(p, s);
    gemm_rs<MT, DT, NT / 2, true, LK>(o, p, sV, 0, lane);
  }

  cp_async_wait<0>();
  __syncthreads();

  float lse[MT][2];
  sm.finish(o, a.mult, lse);
  const int g = lane >> 2, t = lane & 3;
  if (a.lse != nullptr && t == 0) {
    float* lrow = a.lse + (static_cast<int64_t>(b) * a.heads_q + h) * a.seqlen_q;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = r0 + wrow + mt * 16 + g + 8 * hh;
        if (r < a.seqlen_q) lrow[r] = lse[mt][hh];
      }
  }
  // Stage O through the Q tile (each warp overwrites only its own rows, which
  // only it has read), then write 16-byte rows.
  store_c<LQ, T>(sQ, o, wrow, 0, lane);
  __syncthreads();
  T* gO = static_cast<T*>(const_cast<void*>(a.o.ptr)) + b * a.o.sb + static_cast<int64_t>(r0) * a.o.ss +
          h * a.o.sh;
  store_tile<LQ, NTHREADS>(gO, a.o.ss, sQ, rows, a.d, tid);
}

}  // namespace flashattn::detail::cuda::sm80
