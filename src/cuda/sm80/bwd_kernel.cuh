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
//
// Varlen (SEQ, or VAR at run time; bwd_seq.cuh): the grid covers the key
// tiles of the longest sequence; a block whose key tile starts past its
// sequence's keys exits, the others read their sequence's rows only (tiles
// are zero-filled past the sequence's end, never read from the next one).
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

// S^T = K Q^T and dP^T = V dO^T in one k-loop: the two products share
// nothing, and interleaving them gives each warp twice the independent
// mma.sync chains between shared-memory loads (two warps per scheduler hide
// little latency on their own).
template <int MT, int NT, int KS, class LA, class LB, class T>
__device__ __forceinline__ void gemm_ss_pair(float (&c1)[MT][NT][4], const T* sA1, const T* sB1,
                                             float (&c2)[MT][NT][4], const T* sA2, const T* sB2, int m0, int n0,
                                             int lane) {
  static_assert(NT % 2 == 0, "pairs of n-tiles");
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t a1[MT][4], a2[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      load_frag_a<false, LA>(a1[mt], sA1, m0 + mt * 16, ks * 16, lane);
      load_frag_a<false, LA>(a2[mt], sA2, m0 + mt * 16, ks * 16, lane);
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt += 2) {
      uint32_t b1[4], b2[4];
      load_frag_b2<false, LB>(b1, sB1, n0 + nt * 8, ks * 16, lane);
      load_frag_b2<false, LB>(b2, sB2, n0 + nt * 8, ks * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<T>(c1[mt][nt], a1[mt], b1[0], b1[1]);
        mma_16816<T>(c1[mt][nt + 1], a1[mt], b1[2], b1[3]);
        mma_16816<T>(c2[mt][nt], a2[mt], b2[0], b2[1]);
        mma_16816<T>(c2[mt][nt + 1], a2[mt], b2[2], b2[3]);
      }
    }
  }
}

// P^T = exp2(S^T * mult - LSE * log2 e) and dS^T = P^T * (dP^T - D), in place
// on the C fragments (rows keys sk0 + 16mt + g + 8hh, columns queries
// sq0 + 8nt + 2t + e). Versioned at compile time on softcap and on whether
// the tile needs the mask, so the common case (no softcap, full tile) is one
// FFMA, one MUFU and two FP ops per element with no branches.
// sLSE holds the raw natural-log LSE: -inf (a row that sees nothing) maps to
// +inf so that P = 0; rows past Sq were zero-filled, which is harmless
// because their dO rows are zero too (P^T dO and dS^T = P^T (0 - 0) add 0).
//
// VAR (variants.cuh): the ALiBi bias slope_unit |query + Sk - Sq - key|
// joins the score before the exp, and with dropout P~ = P Z / (1 - p) goes
// to sP (dV = P~^T dO) while dS = P (dP~ Z / (1 - p) - D) (D = rowsum(dO O)
// is unchanged: rowsum(P o dP) = rowsum(P~ o dP~)).
template <bool SOFTCAP, bool FULL, bool VAR = false, int MT, int NT>
__device__ __forceinline__ void bwd_p_ds(float (&s)[MT][NT][4], float (&dp)[MT][NT][4], const float* sLSE,
                                         const float* sDD, const BwdArgs& a, const WindowMask& mask, int m0,
                                         int c0, int sk0, int sq0, int g, int t, float slope_unit = 0.f,
                                         uint32_t drop_bh = 0) {
  [[maybe_unused]] const int lane = 4 * g + t;
  [[maybe_unused]] uint64_t keep = 0;
  if constexpr (VAR) {
    if (a.dropout) keep = col_keep_mask<MT, NT>(a, drop_bh, c0 + sk0, m0 + sq0, lane);
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int qc = sq0 + nt * 8 + 2 * t;
    const float2 lse2 = *reinterpret_cast<const float2*>(sLSE + qc);
    const float2 dd2 = *reinterpret_cast<const float2*>(sDD + qc);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float lse = e == 0 ? lse2.x : lse2.y, dd = e == 0 ? dd2.x : dd2.y;
      const float l2 = lse == -INFINITY ? INFINITY : lse * kLog2e;
      int lo = 0, hi = 0;  // keys this query sees, relative to c0
      if constexpr (!FULL) {
        const KeyRange kr = mask.keys(m0 + qc + e);
        lo = static_cast<int>(kr.begin - c0);
        hi = static_cast<int>(kr.end - c0);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int idx = 2 * hh + e;
          float p, ds;
          if constexpr (VAR) {
            const int key = c0 + sk0 + mt * 16 + g + 8 * hh;
            const float bias = alibi_bias(slope_unit, m0 + qc + e + static_cast<int>(mask.offset), key);
            float z = 1.f;
            if (a.dropout) z = keep_at(keep, mt * NT + nt, idx) ? a.keep_scale : 0.f;
            if constexpr (SOFTCAP) {
              const float th = tanhf(s[mt][nt][idx] * a.cap_scale);
              p = fast_exp2(fmaf(a.softcap * th + bias, kLog2e, -l2));
              ds = p * (dp[mt][nt][idx] * z - dd) * (1.f - th * th);
            } else {
              p = fast_exp2(fmaf(s[mt][nt][idx] + bias, a.mult, -l2));
              ds = p * (dp[mt][nt][idx] * z - dd);
            }
            p *= z;
          } else if constexpr (SOFTCAP) {
            const float th = tanhf(s[mt][nt][idx] * a.cap_scale);
            p = fast_exp2(fmaf(a.softcap * th, kLog2e, -l2));
            ds = p * (dp[mt][nt][idx] - dd) * (1.f - th * th);
          } else {
            p = fast_exp2(fmaf(s[mt][nt][idx], a.mult, -l2));
            ds = p * (dp[mt][nt][idx] - dd);
          }
          if constexpr (!FULL) {
            const int kr_local = sk0 + mt * 16 + g + 8 * hh;
            if (kr_local < lo || kr_local >= hi) p = ds = 0.f;
          }
          s[mt][nt][idx] = p;
          dp[mt][nt][idx] = ds;
        }
      }
    }
  }
}

// VAR: ALiBi / dropout / softcap (bwd_p_ds); SEQ: varlen batches (bwd_seq.cuh). Both
// are launched with DET = false for both modes, the dQ atomics then switched
// at run time (a.dq_accum == nullptr when deterministic), so that each adds
// one instantiation, not two. The VAR kernel handles varlen batches too (a
// run-time switch on a.cu_q): ALiBi / dropout with varlen need no third one.
template <class T, int D, bool DET, bool BIG_SMEM = false, bool VAR = false, bool SEQ = false>
__global__ void __launch_bounds__(BwdCfg<D, BIG_SMEM>::NW * 32) bwd_kernel(const BwdArgs a) {
  using Cfg = BwdCfg<D, BIG_SMEM>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, NW = Cfg::NW, NTHREADS = NW * 32, QBUF = Cfg::QBUF;
  constexpr int S_MT = BN / (16 * Cfg::SDP_K), S_NT = BM / (8 * Cfg::SDP_Q);
  constexpr int KV_MT = BN / (16 * Cfg::KV_K), KV_NT = D / (8 * Cfg::KV_D);
  constexpr int DQ_MT = BM / (16 * Cfg::DQ_Q), DQ_NT = D / (8 * Cfg::DQ_D);
  static_assert(S_MT * 16 * Cfg::SDP_K == BN && S_NT * 8 * Cfg::SDP_Q == BM, "SdP tiling");
  static_assert(KV_MT * 16 * Cfg::KV_K == BN && KV_NT * 8 * Cfg::KV_D == D, "dKV tiling");
  static_assert(DQ_MT * 16 * Cfg::DQ_Q == BM && DQ_NT * 8 * Cfg::DQ_D == D, "dQ tiling");
  static_assert(NTHREADS >= 2 * BM, "one thread per LSE and per D row");
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
  float* sLSE = reinterpret_cast<float*>(sdS + LP::kSize);  // natural-log LSE
  float* sDD = sLSE + QBUF * BM;                            // D = rowsum(dO * O)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const GridBlock blk = grid_block(blockIdx.x, a.group_units, a.full_groups, a.n_blocks, a.heads_kv, a.batch);
  const int hk = blk.hk, b = blk.b, n_block = blk.n;
  constexpr bool kSeq = SEQ || VAR;
  const BwdSeq seq = bwd_seq<kSeq>(a, b);
  const WindowMask& mask = kSeq ? seq.mask : a.mask;
  const int Sq = seq.len_q;
  const int c0 = n_block * BN;
  if constexpr (kSeq) {
    if (c0 >= seq.len_k) return;  // past this sequence's keys (the grid covers the longest)
  }
  const int keys = min(BN, seq.len_k - c0);

  // The query tiles with a row that sees one of the block's keys.
  const KeyRange rows = mask.queries(c0, static_cast<int64_t>(c0) + keys, Sq);
  int m_first = 0, m_count = 0;
  if (rows.begin < rows.end) {
    m_first = static_cast<int>(rows.begin / BM);
    m_count = static_cast<int>((rows.end + BM - 1) / BM) - m_first;
  }
  const int total = m_count * a.group;  // (query head, query tile) steps

  const T* qbase = static_cast<const T*>(a.q.ptr);
  const T* kbase = static_cast<const T*>(a.k.ptr);
  const T* vbase = static_cast<const T*>(a.v.ptr);
  const T* dobase = static_cast<const T*>(a.dout.ptr);

  auto load_q = [&](int hq, int m0, int buf) {
    const int rows = min(BM, Sq - m0);
    const int64_t qr = seq.q_off + m0;  // packed row (varlen) or row of batch entry b
    load_tile_async<LQ, NTHREADS>(sQ0 + buf * LQ::kSize, qbase + b * a.q.sb + qr * a.q.ss + hq * a.q.sh, a.q.ss,
                                  rows, a.d, qbase, tid);
    load_tile_async<LQ, NTHREADS>(sdO0 + buf * LQ::kSize, dobase + b * a.dout.sb + qr * a.dout.ss + hq * a.dout.sh,
                                  a.dout.ss, rows, a.d, dobase, tid);
    // LSE and D rows travel with Q and dO (cp.async, no register round trip:
    // a plain load here stalled the loading warps for a DRAM latency every step).
    if (tid < 2 * BM) {
      const int r = tid % BM, i = m0 + r;
      const int64_t idx = bwd_row0<kSeq>(a, seq, b, hq) + i;
      const float* src = tid < BM ? a.lse : a.dsum;
      float* dst = (tid < BM ? sLSE : sDD) + buf * BM + r;
      cp_async_4(dst, i < Sq ? src + idx : src, i < Sq);
    }
  };

  const int64_t kr0 = seq.k_off + c0;  // first key row of the block
  load_tile_async<LK, NTHREADS>(sK, kbase + b * a.k.sb + kr0 * a.k.ss + hk * a.k.sh, a.k.ss, keys, a.d, kbase, tid);
  load_tile_async<LK, NTHREADS>(sV, vbase + b * a.v.sb + kr0 * a.v.ss + hk * a.v.sh, a.v.ss, keys, a.d, vbase, tid);
  // Steps walk the query tiles of one head, then the next head of the group,
  // in the order a.walk picks (kernel_traits.hpp BwdSteps).
  const BwdSteps steps(a.walk, m_first, m_count, n_block);
  int cur_h = hk * a.group, cur_m = steps.start;
  if (total > 0) load_q(cur_h, cur_m * BM, 0);
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
    int nxt_h = cur_h, nxt_m = cur_m;
    steps.next(nxt_h, nxt_m);
    if (QBUF == 2 && it + 1 < total) {
      load_q(nxt_h, nxt_m * BM, buf ^ 1);
      cp_async_commit();
    }
    const int hq = cur_h, m0 = cur_m * BM;
    const T* cQ = sQ0 + buf * LQ::kSize;
    const T* cdO = sdO0 + buf * LQ::kSize;

    const bool full = mask.tile_full(m0, min(m0 + BM, Sq), c0, c0 + BN);
    const float* cLSE = sLSE + buf * BM;
    const float* cDD = sDD + buf * BM;
    float s[S_MT][S_NT][4], dp[S_MT][S_NT][4];
#pragma unroll
    for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < S_NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = dp[mt][nt][e] = 0.f;
    if constexpr (Cfg::PAIR_SDP) {
      gemm_ss_pair<S_MT, S_NT, D / 16, LK, LQ>(s, sK, cQ, dp, sV, cdO, sk0, sq0, lane);
    } else {
      gemm_ss<S_MT, S_NT, D / 16, false, false, LK, LQ>(s, sK, sk0, cQ, sq0, lane);
      gemm_ss<S_MT, S_NT, D / 16, false, false, LK, LQ>(dp, sV, sk0, cdO, sq0, lane);
    }
    if constexpr (VAR) {
      const float slope_unit = a.alibi != nullptr ? a.alibi[b * a.alibi_sb + hq] * a.alibi_unit : 0.f;
      const uint32_t bh = drop_row(a, b, hq);
      if (a.softcap > 0.f) {
        if (full)
          bwd_p_ds<true, true, true>(s, dp, cLSE, cDD, a, mask, m0, c0, sk0, sq0, g, t, slope_unit, bh);
        else
          bwd_p_ds<true, false, true>(s, dp, cLSE, cDD, a, mask, m0, c0, sk0, sq0, g, t, slope_unit, bh);
      } else {
        if (full)
          bwd_p_ds<false, true, true>(s, dp, cLSE, cDD, a, mask, m0, c0, sk0, sq0, g, t, slope_unit, bh);
        else
          bwd_p_ds<false, false, true>(s, dp, cLSE, cDD, a, mask, m0, c0, sk0, sq0, g, t, slope_unit, bh);
      }
    } else {
      // No softcap here: launch_bwd.cuh sends it to the VAR kernel. Its tanh
      // path, compiled into this loop beside the plain one, made ptxas spill
      // in the plain kernel (head dim 64: 68 -> 8 bytes, 256: 36 -> 0).
      if (full)
        bwd_p_ds<false, true>(s, dp, cLSE, cDD, a, mask, m0, c0, sk0, sq0, g, t);
      else
        bwd_p_ds<false, false>(s, dp, cLSE, cDD, a, mask, m0, c0, sk0, sq0, g, t);
    }
    store_c<LP, T>(sP, s, sk0, sq0, lane);
    store_c<LP, T>(sdS, dp, sk0, sq0, lane);
    __syncthreads();

    // dQ first: its reductions then drain to L2 while the dV and dK products
    // run, instead of queueing in front of the next step's shared loads.
    if constexpr (!DET) {
      if (!(VAR || SEQ) || a.dq_accum != nullptr) {
      // In chunks of 4 n-tiles (3 at head dim 192): at head dim 256 the
      // whole 32 x 64 warp tile next to dK and dV spilled.
      constexpr int CH = DQ_NT <= 4 ? DQ_NT : DQ_NT % 4 == 0 ? 4 : DQ_NT / 2;
      static_assert(DQ_NT % CH == 0, "dQ chunks");
      float* acc = a.dq_accum + bwd_row0<kSeq>(a, seq, b, hq) * D;
#pragma unroll
      for (int c = 0; c < DQ_NT / CH; ++c) {
        float dq[DQ_MT][CH][4];
#pragma unroll
        for (int mt = 0; mt < DQ_MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < CH; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) dq[mt][nt][e] = 0.f;
        const int d0 = qd0 + c * CH * 8;
        gemm_ss<DQ_MT, CH, BN / 16, true, true, LP, LK>(dq, sdS, qq0, sK, d0, lane);
#pragma unroll
        for (int mt = 0; mt < DQ_MT; ++mt) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int i = m0 + qq0 + mt * 16 + g + 8 * hh;
            if (i < Sq) {
              float* row = acc + static_cast<int64_t>(i) * D + d0 + 2 * t;
#pragma unroll
              for (int nt = 0; nt < CH; ++nt) red_add_f32x2(row + nt * 8, dq[mt][nt][2 * hh], dq[mt][nt][2 * hh + 1]);
            }
          }
        }
      }
      }
    }
    gemm_ss<KV_MT, KV_NT, BM / 16, false, true, LP, LQ>(dv, sP, kk0, cdO, kd0, lane);
    gemm_ss<KV_MT, KV_NT, BM / 16, false, true, LP, LQ>(dk, sdS, kk0, cQ, kd0, lane);
    if (QBUF == 1 && it + 1 < total) {
      __syncthreads();  // every warp is done with Q, dO and the LSE/D rows
      load_q(nxt_h, nxt_m * BM, 0);
      cp_async_commit();
    }
    cur_h = nxt_h;
    cur_m = nxt_m;
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
  T* gdK = static_cast<T*>(const_cast<void*>(a.dk.ptr)) + b * a.dk.sb + kr0 * a.dk.ss + hk * a.dk.sh;
  T* gdV = static_cast<T*>(const_cast<void*>(a.dv.ptr)) + b * a.dv.sb + kr0 * a.dv.ss + hk * a.dv.sh;
  store_tile<LK, NTHREADS>(gdK, a.dk.ss, sK, keys, a.d, tid);
  store_tile<LK, NTHREADS>(gdV, a.dv.ss, sV, keys, a.d, tid);
}

// The instantiation a problem runs (one place for launch_bwd.cuh and the CPU
// emulation harnesses): ALiBi / dropout / softcap on the VAR kernel (varlen
// or not), varlen without them on SEQ, each for both modes (their dQ atomics
// are off when BwdArgs::dq_accum is null, i.e. deterministic); the plain and
// SEQ kernels have no softcap path.
template <class T, int D, bool BIG_SMEM = false>
auto bwd_kernel_for(const BwdParams& p) {
  using Kernel = void (*)(BwdArgs);
  if (p.has_variants() || p.softcap > 0.f) return Kernel(&bwd_kernel<T, D, false, BIG_SMEM, true>);
  if (p.varlen()) return Kernel(&bwd_kernel<T, D, false, BIG_SMEM, false, true>);
  if (p.deterministic) return Kernel(&bwd_kernel<T, D, true, BIG_SMEM>);
  return Kernel(&bwd_kernel<T, D, false, BIG_SMEM>);
}

}  // namespace flashattn::detail::cuda::sm80
