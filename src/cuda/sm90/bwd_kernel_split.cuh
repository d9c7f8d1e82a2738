// The consumer warpgroups of the Hopper backward at head dims 192 and 256
// (BwdTraits::kSplitHeadDim; the producer warp and the kernel are
// bwd_kernel.cuh's).
//
// At head dim 256 a warpgroup that owned 64 keys, as at 64 and 128, would
// hold dK and dV for them over all 256 columns: 256 fp32 registers per
// thread (192 at head dim 192, beside the 64 of S^T and dP^T: too many too).
// So the CTA takes 64 keys (K and V: 64 KB at 256), steps over 64 queries
// (Q and dO: 64 KB per stage, two stages), and its two warpgroups split the
// work in two ways:
//   S^T  = K Q_w^T      [64 keys x 32 queries], queries 32w .. 32w+31   ss
//   dP^T = V dO_w^T     [64 x 32]                                       ss
//   P^T, dS^T           computed for those 32 queries, written (16-bit,
//                       128-byte swizzle, [key][query]) to shared memory;
//                       both warpgroups meet at kBarDS
//   dV_w += P^T dO      [64 keys x C_w columns], columns 128w ..        ss_bt
//   dK_w += dS^T Q      [64 x C_w]                                      ss_bt
//   dQ_w  = dS K        [64 queries x C_w columns], columns 128w ..     ss_tt
// with C_0 = 128 and C_1 = head_dim - 128 (bwd_split_cols: whole atoms, so
// at 192 the second warpgroup has half the first one's dV/dK/dQ work and
// runs ahead into the next step's S^T; the tensor cores are shared, so the
// total work is what counts). dK, dV and dQ take C_w / 2 registers each.
// The shared memory left after K, V, the Q/dO ring and P^T/dS^T (two buffers
// each: a step's writes must not reach what the other warpgroup's wgmmas of
// the step before may still read) is ~1 KB at 256, too little for a dQ
// staging tile (64 x 256 fp32 = 64 KB). But after the barrier each
// warpgroup's wgmmas read only its own columns of Q and dO (C_w x 128 bytes
// each), and dQ_w takes C_w x 256 bytes: so dQ_w is staged there, once dV_w
// and dK_w have retired, and the dQ writer warp adds the whole tile with
// four bulk reduce-adds before it frees the stage (bwd_dq_writer_split).
// (A first version added dQ from registers with red.global.add.v2.f32, as
// FlashAttention-2 does with scalar atomics: ncu showed L2 82% busy with
// one request per 32-byte sector, tensor pipes 31%; bench/sm90/NOTES.md.)
#pragma once

#include <cstdint>

#include "block_mask.cuh"
#include "bwd_epilogue.cuh"
#include "bwd_kernel_args.hpp"
#include "bwd_ptx.cuh"
#include "bwd_seq.cuh"
#include "score_mod.cuh"
#include "bwd_traits.cuh"
#include "ptx.cuh"
#include "wgmma.cuh"

namespace flashattn::detail::cuda::sm90 {

// Consumer warpgroup cw (0 or 1): queries 32cw .. 32cw + 31 of each step's
// S^T and dP^T, head-dim columns 128cw .. 128cw + kCols - 1 of dK, dV and
// dQ (kCols = bwd_split_cols(kHeadDim, cw)).
template <class T, class Step, bool kVarlen, int kMod, int kCols>
__device__ __forceinline__ void bwd_consumer_split(const BwdKernelArgs& a, const BwdSmem<T>& sm,
                                                   const BwdSeq& seq, int hk, int c0, int total,
                                                   const QueryTileRange& qr, int cw, int tid) {
  constexpr int kBlockM = T::kBlockM, kBlockN = T::kBlockN, kHeadDim = T::kHeadDim;
  static_assert(T::kSplitHeadDim && kBlockM == 64 && kBlockN == 64 && kCols % 64 == 0, "");
  const int atom0 = bwd_split_col0(cw) / 64;  // this warpgroup's first atom column
  using Tag = typename T::MmaTag;
  using E = ElementTraits<typename T::Element>;
  const int warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  // This thread's accumulator rows: keys krow, krow + 8 of S^T, dP^T, dK,
  // dV; queries krow, krow + 8 of dQ.
  const int krow = 16 * warp + lane / 4;

  float dk[kCols / 2], dv[kCols / 2];
#pragma unroll
  for (int i = 0; i < kCols / 2; ++i) dk[i] = dv[i] = 0.f;

  const BlockMask& mask = seq.mask;
  mbar_wait(sm.kv_full(), 0);
  if (kVarlen && c0 + kBlockN > seq.len_k) {  // bwd_seq.cuh
    zero_rows_past_end<kBlockN, T::kAtoms>(sm.k(), sm.v(), seq.len_k - c0, 128 * cw + tid, 256, T::kBarZero);
  }
  // K and V [key][head dim] as K-major A operands of S^T and dP^T.
  const uint64_t desc_k = make_desc_sw128(sm.k(), 16, 1024);
  const uint64_t desc_v = make_desc_sw128(sm.v(), 16, 1024);
  // K as dQ's MN-major B: this warpgroup's N = kCols columns are K's atom
  // columns atom0, ... (LBO: one atom column).
  const uint64_t desc_kb = make_desc_sw128(sm.k() + atom0 * kBlockN * 128, kBlockN * 128, 1024);
  // P^T and dS^T stores: row r's 16-byte chunk j (queries 8j .. 8j + 7) sits
  // at chunk j ^ (r % 8); r % 8 = lane / 4 for both of this thread's rows
  // and fills address bits 4-6, so each address is pds_row xor a constant
  // (bwd_kernel.cuh's dS^T stores, likewise).
  const uint32_t pds_row = krow * 128 + (lane / 4) * 16 + t4 * 4;

  for (int it = 0; it < total; ++it) {
    const Step st(it, hk, a.group, qr);
    const int buf = it & 1;
    mbar_wait(sm.q_full(st.stage), st.phase);
    if (kVarlen && st.m0 + kBlockM > seq.len_q) {
      zero_rows_past_end<kBlockM, T::kAtoms>(sm.q(st.stage), sm.dout(st.stage), seq.len_q - st.m0,
                                             128 * cw + tid, 256, T::kBarZero);
    }
    // Q and dO rows 32cw .. (8-row groups are 1024 bytes apart) as K-major B.
    const uint64_t desc_q = make_desc_sw128(sm.q(st.stage) + cw * 32 * 128, 16, 1024);
    const uint64_t desc_do = make_desc_sw128(sm.dout(st.stage) + cw * 32 * 128, 16, 1024);

    float s[16], dp[16];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t oa = (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      const uint32_t ob = (kk / 4) * kBlockM * 128 + (kk % 4) * 32;
      Wgmma<32, Tag>::ss(s, desc_advance(desc_k, oa), desc_advance(desc_q, ob), kk > 0);
    }
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t oa = (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      const uint32_t ob = (kk / 4) * kBlockM * 128 + (kk % 4) * 32;
      Wgmma<32, Tag>::ss(dp, desc_advance(desc_v, oa), desc_advance(desc_do, ob), kk > 0);
    }
    wgmma_commit();
    // Accumulator element 4j + 2hh + e: key krow + 8hh, query 32cw + 8j +
    // 2t4 + e of the step. Padding rows (>= seqlen_q) carry LSE*log2e = +inf.
    const int qc = 32 * cw + 2 * t4;  // this thread's first query column
    float2 lse[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) lse[j] = ld_shared_f32x2(sm.lse(st.stage) + (qc + 8 * j) * 4);
    wgmma_wait<1>();
    fence_operand(s);
    [[maybe_unused]] uint32_t g[8];  // softcap: 1 - tanh^2, for dS
    // score_mod.cuh: natural units (a.scale_log2 = log2 e).
    [[maybe_unused]] float neg_slope = 0.f;
    if constexpr ((kMod & kModAlibi) != 0) neg_slope = -a.alibi[blockIdx.z * a.alibi_batch_stride + st.head];
    modify_scores_bwd<kMod>(s, g, a, neg_slope, static_cast<float>(st.m0 + qc + mask.offset - (c0 + krow)));

#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        s[4 * j + 2 * hh + 0] = ex2(fmaf(s[4 * j + 2 * hh + 0], a.scale_log2, -lse[j].x));
        s[4 * j + 2 * hh + 1] = ex2(fmaf(s[4 * j + 2 * hh + 1], a.scale_log2, -lse[j].y));
      }
    }
    if (!tile_is_full<kBlockN>(mask, st.m0, min(st.m0 + kBlockM, seq.len_q), c0)) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = st.m0 + qc + 8 * j + e;
          const int lo = mask.lo(q), hi = mask.hi(q);
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int key = c0 + krow + 8 * hh;
            if (key < lo || key >= hi) s[4 * j + 2 * hh + e] = 0.f;
          }
        }
      }
    }
    // P^T to this step's buffer: this warpgroup's chunks are 4cw .. 4cw + 3.
    const uint32_t p_row = sm.p(buf) + pds_row, ds_row = sm.ds(buf) + pds_row;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        st_shared_u32((p_row ^ ((4 * cw + j) * 16)) + hh * 8 * 128,
                      E::pack(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]));
      }
    }
    wgmma_wait<0>();
    fence_operand(dp);
    // dS^T = P^T (dP^T - D).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 d = ld_shared_f32x2(sm.dsum(st.stage) + (qc + 8 * j) * 4);
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float ds0 = s[4 * j + 2 * hh] * (dp[4 * j + 2 * hh] - d.x);
        float ds1 = s[4 * j + 2 * hh + 1] * (dp[4 * j + 2 * hh + 1] - d.y);
        if constexpr ((kMod & kModSoftcap) != 0) {
          const float2 gg = unpack_half2(g[2 * j + hh]);
          ds0 *= gg.x;
          ds1 *= gg.y;
        }
        st_shared_u32((ds_row ^ ((4 * cw + j) * 16)) + hh * 8 * 128, E::pack(ds0, ds1));
      }
    }
    fence_proxy_async_smem();  // st.shared -> wgmma reads (async proxy)
    named_barrier_sync_unaligned(T::kBarDS, 256);

    // dV_w += P^T dO, dK_w += dS^T Q over the step's 64 queries: P^T and
    // dS^T K-major A; dO and Q MN-major B from atom column atom0 (LBO: one
    // atom column).
    const uint64_t desc_p = make_desc_sw128(sm.p(buf), 16, 1024);
    const uint64_t desc_ds = make_desc_sw128(sm.ds(buf), 16, 1024);
    const uint64_t desc_do_mn =
        make_desc_sw128(sm.dout(st.stage) + atom0 * kBlockM * 128, kBlockM * 128, 1024);
    const uint64_t desc_q_mn =
        make_desc_sw128(sm.q(st.stage) + atom0 * kBlockM * 128, kBlockM * 128, 1024);
    fence_operand(dv);
    fence_operand(dk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      Wgmma<kCols, Tag>::ss_bt(dv, desc_advance(desc_p, kk * 32), desc_advance(desc_do_mn, kk * 16 * 128), 1);
    }
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      Wgmma<kCols, Tag>::ss_bt(dk, desc_advance(desc_ds, kk * 32), desc_advance(desc_q_mn, kk * 16 * 128), 1);
    }
    wgmma_commit();
    // dQ_w = dS K over the 64 keys: dS^T read MN-major as A.
    const uint64_t desc_ds_mn = make_desc_sw128(sm.ds(buf), kBlockN * 128, 1024);
    float dq[kCols / 2];
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      Wgmma<kCols, Tag>::ss_tt(dq, desc_advance(desc_ds_mn, kk * 16 * 128),
                               desc_advance(desc_kb, kk * 16 * 128), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<1>();  // dV_w, dK_w retired: this warpgroup's halves of Q and dO are read
    fence_operand(dv);
    fence_operand(dk);
    wgmma_wait<0>();
    fence_operand(dq);
    // A warp's wait covers its own rows of dV_w and dK_w; the other warps'
    // parts of those wgmmas may still read the B operands (Q and dO halves)
    // that its staging stores overwrite: all four warps first.
    named_barrier_sync(T::kBarWG + cw, 128);

    // Stage dQ_w in the columns of this stage's Q (rows 0-31: warps 0, 1)
    // and dO (rows 32-63: warps 2, 3) that only this warpgroup's dV_w and
    // dK_w read, in the accumulator's layout (bwd_dq_split_offset): rows of
    // kCols floats, row r's chunk c (columns 4c .. 4c + 3) at c ^ (r % 8).
    // Chunk 2j + t4 / 2 and r % 8 = lane / 4 make each address row_base xor
    // (32 j), an immediate.
    constexpr int kRowBytes = kCols * 4;
    const uint32_t region = (warp < 2 ? sm.q(st.stage) : sm.dout(st.stage)) + atom0 * kBlockM * 128;
    const uint32_t row_base =
        region + (krow % 32) * kRowBytes + (((t4 >> 1) ^ (lane >> 2)) << 4) + (t4 & 1) * 8;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        st_shared_f32x2((row_base ^ (32 * j)) + hh * 8 * kRowBytes, dq[4 * j + 2 * hh], dq[4 * j + 2 * hh + 1]);
      }
    }
    // The dQ writer adds both halves, then frees the stage with its own
    // arrival; this thread's (its LSE/D reads and its wgmmas' reads of Q and
    // dO are done) goes to the empty barrier directly, which orders the
    // LSE/D reads before the producer's next stores there for
    // compute-sanitizer too (through the named barrier and the writer's
    // arrival, racecheck flagged each of them).
    fence_proxy_async_smem();  // st.shared -> bulk-copy reads (async proxy)
    named_barrier_arrive_unaligned(T::kBarDQFull + st.stage, T::kDQSyncThreads);
    mbar_arrive(sm.q_empty(st.stage));
  }

  // dK = scale * sum dS^T Q, dV = sum P^T dO, staged in this warpgroup's
  // atom columns (atom0, ...) of the K and V buffers and written by TMA,
  // as bwd_kernel.cuh does at head dims 64 and 128. Every warp of both
  // warpgroups must be past its last wgmma first (S^T and dP^T read all of
  // K and V; a warp's wait covers only its own part of a wgmma).
  named_barrier_sync_unaligned(T::kBarDS, 256);
  // Varlen: a box would write the next sequence's rows past this one's end,
  // so a CTA with such rows stores from registers below.
  if (!kVarlen || c0 + kBlockN <= seq.len_k) {
    stage_dkdv<T, kCols>(sm, dk, dv, krow, t4, atom0, a.scale);
    named_barrier_sync(T::kBarWG + cw, 128);
    if (tid == 0) store_dkdv<T>(a, sm, 0, seq.k_row + c0, hk, seq.map_b, atom0, kCols / 64);
    return;
  }
  // 4-byte stores from registers.
  using Elem = typename T::Element;
  const int col0 = bwd_split_col0(cw);
  Elem* gdk = static_cast<Elem*>(a.dk) + seq.map_b * a.dk_stride_batch + hk * a.dk_stride_head + col0;
  Elem* gdv = static_cast<Elem*>(a.dv) + seq.map_b * a.dv_stride_batch + hk * a.dv_stride_head + col0;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = c0 + krow + 8 * hh;
    if (key < seq.len_k) {
      Elem* rk = gdk + static_cast<int64_t>(seq.k_row + key) * a.dk_stride_seq + 2 * t4;
      Elem* rv = gdv + static_cast<int64_t>(seq.k_row + key) * a.dv_stride_seq + 2 * t4;
#pragma unroll
      for (int j = 0; j < kCols / 8; ++j) {  // up to the caller's head dims
        if (col0 + 8 * j < a.head_dim) {
          *reinterpret_cast<uint32_t*>(rk + 8 * j) =
              E::pack(dk[4 * j + 2 * hh] * a.scale, dk[4 * j + 2 * hh + 1] * a.scale);
        }
        if (col0 + 8 * j < a.head_dim_v) {
          *reinterpret_cast<uint32_t*>(rv + 8 * j) = E::pack(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]);
        }
      }
    }
  }
}

}  // namespace flashattn::detail::cuda::sm90
