// Deterministic dQ for the backward (the "separate dQ kernel" variant of
// FlashAttention-2's Algorithm 2): one block per (BM query rows, query head,
// batch) loops over the key tiles in a fixed order, recomputing
//   S = Q K^T, P = exp(S - LSE), dP = dO V^T, dS = P * (dP - D), dQ += dS K
// with each warp owning 16 whole rows (dS goes from C to A fragments in
// registers, as P does in the forward). No atomics: bit-identical across
// runs, at the cost of recomputing S and dP once more than the main kernel.
// Varlen (SEQ, or VAR at run time; bwd_seq.cuh): the grid covers the query
// tiles of the longest sequence and blocks past their sequence's end exit; a
// sequence without keys gets dQ = 0 (no key tile to visit).
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "common/ptx.cuh"
#include "common/smem_tile.cuh"
#include "common/warp_mma.cuh"
#include "sm80/bwd_seq.cuh"
#include "sm80/kernel_args.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/variants.cuh"

namespace flashattn::detail::cuda::sm80 {

// VAR: ALiBi and dropout (variants.cuh), as in bwd_kernel's bwd_p_ds.
// SEQ: varlen batches (the VAR kernel takes them at run time as well).
template <class T, int D, bool VAR = false, bool SEQ = false>
__global__ void __launch_bounds__(DqCfg<D>::NW * 32) bwd_dq_kernel(const BwdArgs a) {
  using Cfg = DqCfg<D>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, NW = Cfg::NW, NTHREADS = NW * 32, ST = Cfg::KV_STAGES;
  constexpr int MT = BM / (16 * NW), NT = BN / 8, DT = D / 8;
  static_assert(MT * 16 * NW == BM, "dQ kernel tiling");
  using LQ = SmemLayout<BM, D>;
  using LK = SmemLayout<BN, D>;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + LQ::kSize;
  T* sK0 = sdO + LQ::kSize;
  T* sV0 = sK0 + ST * LK::kSize;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int m_block = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / a.group;
  constexpr bool kSeq = SEQ || VAR;
  const BwdSeq seq = bwd_seq<kSeq>(a, b);
  const WindowMask& mask = kSeq ? seq.mask : a.mask;
  const int Sq = seq.len_q, Sk = seq.len_k;
  const int r0 = m_block * BM;
  if constexpr (kSeq) {
    if (r0 >= Sq) return;  // past this sequence's queries (the grid covers the longest)
  }
  const int rows = min(BM, Sq - r0);
  const int wrow = warp * MT * 16;

  const T* qbase = static_cast<const T*>(a.q.ptr);
  const T* kbase = static_cast<const T*>(a.k.ptr);
  const T* vbase = static_cast<const T*>(a.v.ptr);
  const T* dobase = static_cast<const T*>(a.dout.ptr);
  const T* gK = kbase + b * a.k.sb + static_cast<int64_t>(seq.k_off) * a.k.ss + hk * a.k.sh;
  const T* gV = vbase + b * a.v.sb + static_cast<int64_t>(seq.k_off) * a.v.ss + hk * a.v.sh;

  const KeyRange kr = mask.keys(r0, r0 + rows);
  int n_begin = 0, n_end = 0;
  if (!kr.empty()) {
    n_begin = static_cast<int>(kr.begin / BN);
    n_end = static_cast<int>((kr.end + BN - 1) / BN);
  }
  auto load_kv = [&](int n, int st) {
    const int c0 = n * BN;
    load_tile_async<LK, NTHREADS>(sK0 + st * LK::kSize, gK + static_cast<int64_t>(c0) * a.k.ss, a.k.ss, Sk - c0,
                                  a.d, kbase, tid);
    load_tile_async<LK, NTHREADS>(sV0 + st * LK::kSize, gV + static_cast<int64_t>(c0) * a.v.ss, a.v.ss, Sk - c0,
                                  a.d, vbase, tid);
  };

  const int64_t qr0 = seq.q_off + r0;  // first query row of the block
  load_tile_async<LQ, NTHREADS>(sQ, qbase + b * a.q.sb + qr0 * a.q.ss + h * a.q.sh, a.q.ss, rows, a.d, qbase, tid);
  load_tile_async<LQ, NTHREADS>(sdO, dobase + b * a.dout.sb + qr0 * a.dout.ss + h * a.dout.sh, a.dout.ss, rows, a.d,
                                dobase, tid);
  if (n_begin < n_end) load_kv(n_begin, 0);
  cp_async_commit();

  float l2[MT][2], dd[MT][2];
  const int64_t rowbase = bwd_row0<kSeq>(a, seq, b, h);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = r0 + wrow + mt * 16 + g + 8 * hh;
      l2[mt][hh] = INFINITY;
      dd[mt][hh] = 0.f;
      if (r < Sq) {
        const float lse = a.lse[rowbase + r];
        l2[mt][hh] = lse == -INFINITY ? INFINITY : lse * kLog2e;
        dd[mt][hh] = a.dsum[rowbase + r];
      }
    }

  float slope_unit = 0.f;
  uint32_t drop_bh = 0;
  if constexpr (VAR) {
    if (a.alibi != nullptr) slope_unit = a.alibi[b * a.alibi_sb + h] * a.alibi_unit;
    drop_bh = drop_row(a, b, h);
  }

  float dq[MT][DT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dq[mt][dt][e] = 0.f;

  for (int n = n_begin; n < n_end; ++n) {
    const int st = ST == 2 ? ((n - n_begin) & 1) : 0;
    cp_async_wait<0>();
    __syncthreads();
    if (ST == 2 && n + 1 < n_end) {
      load_kv(n + 1, st ^ 1);
      cp_async_commit();
    }
    const T* cK = sK0 + st * LK::kSize;
    const T* cV = sV0 + st * LK::kSize;
    const int c0 = n * BN;

    float s[MT][NT][4], dp[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = dp[mt][nt][e] = 0.f;
    gemm_ss<MT, NT, D / 16, false, false, LQ, LK>(s, sQ, wrow, cK, 0, lane);
    gemm_ss<MT, NT, D / 16, false, false, LQ, LK>(dp, sdO, wrow, cV, 0, lane);

    const bool full = mask.tile_full(r0, r0 + rows, c0, c0 + BN);
    [[maybe_unused]] uint64_t keep = 0;
    if constexpr (VAR) {
      if (a.dropout) keep = row_keep_mask<MT, NT>(a, drop_bh, r0 + wrow, c0, lane);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        int lo = 0, hi = BN;
        if (!full) {
          const KeyRange k = mask.keys(r0 + wrow + mt * 16 + g + 8 * hh);
          lo = static_cast<int>(k.begin - c0);
          hi = static_cast<int>(k.end - c0);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int idx = 2 * hh + e, col = nt * 8 + 2 * t + e;
            float ds;
            if constexpr (VAR) {
              const int rp = r0 + wrow + mt * 16 + g + 8 * hh + static_cast<int>(mask.offset);
              const float bias = alibi_bias(slope_unit, rp, c0 + col);
              float z = 1.f;
              if (a.dropout) z = keep_at(keep, mt * NT + nt, idx) ? a.keep_scale : 0.f;
              if (a.softcap > 0.f) {
                const float th = tanhf(s[mt][nt][idx] * a.cap_scale);
                const float p = fast_exp2(fmaf(a.softcap * th + bias, kLog2e, -l2[mt][hh]));
                ds = p * (dp[mt][nt][idx] * z - dd[mt][hh]) * (1.f - th * th);
              } else {
                const float p = fast_exp2(fmaf(s[mt][nt][idx] + bias, a.mult, -l2[mt][hh]));
                ds = p * (dp[mt][nt][idx] * z - dd[mt][hh]);
              }
            } else if (a.softcap > 0.f) {
              const float th = tanhf(s[mt][nt][idx] * a.cap_scale);
              const float p = fast_exp2(fmaf(a.softcap * th, kLog2e, -l2[mt][hh]));
              ds = p * (dp[mt][nt][idx] - dd[mt][hh]) * (1.f - th * th);
            } else {
              const float p = fast_exp2(fmaf(s[mt][nt][idx], a.mult, -l2[mt][hh]));
              ds = p * (dp[mt][nt][idx] - dd[mt][hh]);
            }
            if (col < lo || col >= hi) ds = 0.f;
            s[mt][nt][idx] = ds;
          }
        }
      }
    }
    uint32_t dsf[MT][NT / 2][4];
    c_to_a<T>(dsf, s);
    gemm_rs<MT, DT, NT / 2, true, LK>(dq, dsf, cK, 0, lane);

    if (ST == 1 && n + 1 < n_end) {
      __syncthreads();  // every warp is done with K_n, V_n
      load_kv(n + 1, 0);
      cp_async_commit();
    }
  }

  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dq[mt][dt][e] *= a.scale;
  store_c<LQ, T>(sQ, dq, wrow, 0, lane);  // own rows only, as in the forward
  __syncthreads();
  T* gdQ = static_cast<T*>(const_cast<void*>(a.dq.ptr)) + b * a.dq.sb + qr0 * a.dq.ss + h * a.dq.sh;
  store_tile<LQ, NTHREADS>(gdQ, a.dq.ss, sQ, rows, a.d, tid);
}

// The instantiation a deterministic problem runs (one place for
// launch_bwd.cuh and the CPU emulation harnesses).
template <class T, int D>
auto bwd_dq_kernel_for(const BwdParams& p) {
  using Kernel = void (*)(BwdArgs);
  if (p.has_variants()) return Kernel(&bwd_dq_kernel<T, D, true>);
  if (p.varlen()) return Kernel(&bwd_dq_kernel<T, D, false, true>);
  return Kernel(&bwd_dq_kernel<T, D>);
}

}  // namespace flashattn::detail::cuda::sm80
