// FlashAttention-2 backward, main kernel (Dao 2023, Algorithm 2 and section
// 3.2 "parallelize over the sequence length" for the backward): one block
// per (BN keys, kv head, batch). K_j and V_j stay in shared memory while the
// block loops over the query tiles of every query head of the kv head's GQA
// group, recomputing P from the saved LSE:
//   S^T = K Q^T,  P^T = exp(S^T - LSE),  dV += P^T dO,
//   dP^T = V dO^T, dS^T = P^T * (dP^T - D),  dK += dS^T Q,  dQ += dS K.
// dK and dV accumulate in registers over the whole group (the GQA reduction
// happens here, in a fixed order, with no workspace). dQ is either added to
// an fp32 workspace with atomics (scaled and converted by bwd_postprocess) or,
// when DET, left to bwd_dq_kernel so the result is bit-reproducible.
//
// P^T and dS^T go through shared memory because the three products that
// consume them need them in different warp tilings (kernel_traits.hpp).
// Query tiles no key of the block sees are skipped; the mask runs only on
// tiles it cuts. Softcap: P uses cap*tanh(s*scale/cap), and dS carries the
// chain-rule factor 1 - tanh^2.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "common/ptx.cuh"
#include "common/smem_tile.cuh"
#include "common/warp_mma.cuh"
#include "sm80/kernel_args.hpp"
#include "sm80/kernel_traits.hpp"

namespace flashattn::detail::cuda::sm80 {

template <class T, int D, bool DET>
__global__ void __launch_bounds__(BwdCfg<D>::NW * 32) bwd_kernel(const BwdArgs a) {
  using Cfg = BwdCfg<D>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, NW = Cfg::NW, NTHREADS = NW * 32, QBUF = Cfg::QBUF;
  constexpr int S_MT = BN / (16 * Cfg::SDP_K), S_NT = BM / (8 * Cfg::SDP_Q);
  constexpr int KV_MT = BN / (16 * Cfg::KV_K), KV_NT = D / (8 * Cfg::KV_D);
  constexpr int DQ_MT = BM / (16 * Cfg::DQ_Q), DQ_NT = D / (8 * Cfg::DQ_D);
  static_assert(S_MT * 16 * Cfg::SDP_K == BN && S_NT * 8 * Cfg::SDP_Q == BM, "SdP tiling");
  static_assert(KV_MT * 16 * Cfg::KV_K == BN && KV_NT * 8 * Cfg::KV_D == D, "dKV tiling");
  static_assert(DQ_MT * 16 * Cfg::DQ_Q == BM && DQ_NT * 8 * Cfg::DQ_D == D, "dQ tiling");
  using LK = SmemLayout<BN, D>;   // K, V; dK, dV staging
  using LQ = SmemLayout<BM, D>;   // Q, dO
  using LP = SmemLayout<BN, BM>;  // P^T, dS^T: [key][query]

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + LK::kSize;
  T* sQ0 = sV + LK::kSize;
  T* sdO0 = sQ0 + QBUF * LQ::kSize;
  T* sP = sdO0 + QBUF * LQ::kSize;
  T* sdS = sP + LP::kSize;
  float* sLSE = reinterpret_cast<float*>(sdS + LP::kSize);  // LSE * log2(e), +inf for empty rows
  float* sDD = sLSE + QBUF * BM;                            // D = rowsum(dO * O)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n_block = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int Sq = a.seqlen_q;
  const int c0 = n_block * BN, keys = min(BN, a.seqlen_k - c0);

  // Query rows i that see a key in [c0, c0 + keys): keys(i).end > c0 and
  // keys(i).begin < c0 + keys (both bounds are non-decreasing in i).
  int64_t i_lo = 0, i_hi = Sq;
  if (a.mask.right >= 0) {
    const int64_t v = c0 - a.mask.offset - a.mask.right;
    i_lo = v > i_lo ? v : i_lo;
  }
  if (a.mask.left >= 0) {
    const int64_t v = static_cast<int64_t>(c0) + keys - a.mask.offset + a.mask.left;
    i_hi = v < i_hi ? v : i_hi;
  }
  int m_first = 0, m_count = 0;
  if (i_lo < i_hi) {
    m_first = static_cast<int>(i_lo / BM);
    m_count = static_cast<int>((i_hi + BM - 1) / BM) - m_first;
  }
  const int total = m_count * a.group;  // (query head, query tile) steps

  const T* qbase = static_cast<const T*>(a.q.ptr);
  const T* kbase = static_cast<const T*>(a.k.ptr);
  const T* vbase = static_cast<const T*>(a.v.ptr);
  const T* dobase = static_cast<const T*>(a.dout.ptr);

  auto step_head = [&](int it) { return hk * a.group + it / m_count; };
  auto step_row0 = [&](int it) { return (m_first + it % m_count) * BM; };
  auto load_q = [&](int it, int buf) {
    const int hq = step_head(it), m0 = step_row0(it);
    const int rows = min(BM, Sq - m0);
    load_tile_async<LQ, NTHREADS>(sQ0 + buf * LQ::kSize,
                                  qbase + b * a.q.sb + static_cast<int64_t>(m0) * a.q.ss + hq * a.q.sh, a.q.ss,
                                  rows, a.d, qbase, tid);
    load_tile_async<LQ, NTHREADS>(
        sdO0 + buf * LQ::kSize,
        dobase + b * a.dout.sb + static_cast<int64_t>(m0) * a.dout.ss + hq * a.dout.sh, a.dout.ss, rows, a.d,
        dobase, tid);
    if (tid < BM) {
      const int i = m0 + tid;
      float l2 = INFINITY, dd = 0.f;  // rows past Sq: P = 0
      if (i < Sq) {
        const int64_t idx = (static_cast<int64_t>(b) * a.heads_q + hq) * Sq + i;
        const float lse = a.lse[idx];
        l2 = lse == -INFINITY ? INFINITY : lse * kLog2e;  // a row that saw nothing has P = 0
        dd = a.dsum[idx];
      }
      sLSE[buf * BM + tid] = l2;
      sDD[buf * BM + tid] = dd;
    }
  };

  load_tile_async<LK, NTHREADS>(sK, kbase + b * a.k.sb + static_cast<int64_t>(c0) * a.k.ss + hk * a.k.sh, a.k.ss,
                                keys, a.d, kbase, tid);
  load_tile_async<LK, NTHREADS>(sV, vbase + b * a.v.sb + static_cast<int64_t>(c0) * a.v.ss + hk * a.v.sh, a.v.ss,
                                keys, a.d, vbase, tid);
  if (total > 0) load_q(0, 0);
  cp_async_commit();

  float dk[KV_MT][KV_NT][4], dv[KV_MT][KV_NT][4];
#pragma unroll
  for (int mt = 0; mt < KV_MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < KV_NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[mt][nt][e] = dv[mt][nt][e] = 0.f;

  const int sk0 = (warp / Cfg::SDP_Q) * S_MT * 16, sq0 = (warp % Cfg::SDP_Q) * S_NT * 8;
  const int kk0 = (warp / Cfg::KV_D) * KV_MT * 16, kd0 = (warp % Cfg::KV_D) * KV_NT * 8;
  const int qq0 = (warp / Cfg::DQ_D) * DQ_MT * 16, qd0 = (warp % Cfg::DQ_D) * DQ_NT * 8;

  for (int it = 0; it < total; ++it) {
    const int buf = QBUF == 2 ? (it & 1) : 0;
    cp_async_wait<0>();  // this step's Q, dO (and K, V) landed
    __syncthreads();     // ... everywhere; the other buffer, sP and sdS are free
    if (QBUF == 2 && it + 1 < total) {
      load_q(it + 1, buf ^ 1);
      cp_async_commit();
    }
    const int hq = step_head(it), m0 = step_row0(it);
    const T* cQ = sQ0 + buf * LQ::kSize;
    const T* cdO = sdO0 + buf * LQ::kSize;

    float s[S_MT][S_NT][4], dp[S_MT][S_NT][4];
#pragma unroll
    for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < S_NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = dp[mt][nt][e] = 0.f;
    gemm_ss<S_MT, S_NT, D / 16, false, false, LK, LQ>(s, sK, sk0, cQ, sq0, lane);
    gemm_ss<S_MT, S_NT, D / 16, false, false, LK, LQ>(dp, sV, sk0, cdO, sq0, lane);

    // Rows of s are keys (sk0 + 16mt + g + 8hh), columns queries (sq0 + 8nt + 2t + e).
    const bool full = a.mask.tile_full(m0, min(m0 + BM, Sq), c0, c0 + BN);
#pragma unroll
    for (int nt = 0; nt < S_NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int qc = sq0 + nt * 8 + 2 * t + e;
        const float l2 = sLSE[buf * BM + qc], dd = sDD[buf * BM + qc];
        int lo = 0, hi = BN;  // keys this query sees, relative to c0
        if (!full) {
          const KeyRange kr = a.mask.keys(m0 + qc);
          lo = static_cast<int>(kr.begin - c0);
          hi = static_cast<int>(kr.end - c0);
        }
#pragma unroll
        for (int mt = 0; mt < S_MT; ++mt) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int kr_local = sk0 + mt * 16 + g + 8 * hh;
            const int idx = 2 * hh + e;
            float p, ds;
            if (a.softcap > 0.f) {
              const float th = tanhf(s[mt][nt][idx] * a.cap_scale);
              p = fast_exp2(fmaf(a.softcap * th, kLog2e, -l2));
              ds = p * (dp[mt][nt][idx] - dd) * (1.f - th * th);
            } else {
              p = fast_exp2(fmaf(s[mt][nt][idx], a.mult, -l2));
              ds = p * (dp[mt][nt][idx] - dd);
            }
            if (kr_local < lo || kr_local >= hi) p = ds = 0.f;
            s[mt][nt][idx] = p;
            dp[mt][nt][idx] = ds;
          }
        }
      }
    }
    store_c<LP, T>(sP, s, sk0, sq0, lane);
    store_c<LP, T>(sdS, dp, sk0, sq0, lane);
    __syncthreads();

    gemm_ss<KV_MT, KV_NT, BM / 16, false, true, LP, LQ>(dv, sP, kk0, cdO, kd0, lane);
    gemm_ss<KV_MT, KV_NT, BM / 16, false, true, LP, LQ>(dk, sdS, kk0, cQ, kd0, lane);

    if constexpr (!DET) {
      float dq[DQ_MT][DQ_NT][4];
#pragma unroll
      for (int mt = 0; mt < DQ_MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < DQ_NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) dq[mt][nt][e] = 0.f;
      gemm_ss<DQ_MT, DQ_NT, BN / 16, true, true, LP, LK>(dq, sdS, qq0, sK, qd0, lane);
      float* acc = a.dq_accum + (static_cast<int64_t>(b) * a.heads_q + hq) * Sq * D;
#pragma unroll
      for (int mt = 0; mt < DQ_MT; ++mt) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i = m0 + qq0 + mt * 16 + g + 8 * hh;
          if (i < Sq) {
            float* row = acc + static_cast<int64_t>(i) * D + qd0 + 2 * t;
#pragma unroll
            for (int nt = 0; nt < DQ_NT; ++nt) {
              atomicAdd(row + nt * 8, dq[mt][nt][2 * hh]);
              atomicAdd(row + nt * 8 + 1, dq[mt][nt][2 * hh + 1]);
            }
          }
        }
      }
    }
    if (QBUF == 1 && it + 1 < total) {
      __syncthreads();  // every warp is done with Q, dO and the LSE/D rows
      load_q(it + 1, 0);
      cp_async_commit();
    }
  }

  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < KV_MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < KV_NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[mt][nt][e] *= a.scale;
  store_c<LK, T>(sK, dk, kk0, kd0, lane);
  store_c<LK, T>(sV, dv, kk0, kd0, lane);
  __syncthreads();
  T* gdK = static_cast<T*>(const_cast<void*>(a.dk.ptr)) + b * a.dk.sb + static_cast<int64_t>(c0) * a.dk.ss +
           hk * a.dk.sh;
  T* gdV = static_cast<T*>(const_cast<void*>(a.dv.ptr)) + b * a.dv.sb + static_cast<int64_t>(c0) * a.dv.ss +
           hk * a.dv.sh;
  store_tile<LK, NTHREADS>(gdK, a.dk.ss, sK, keys, a.d, tid);
  store_tile<LK, NTHREADS>(gdV, a.dv.ss, sV, keys, a.d, tid);
}

}  // namespace flashattn::detail::cuda::sm80
