// Hopper backward kernel (FlashAttention-2's backward, Dao 2023, Algorithm 2,
// on FlashAttention-3's machinery: TMA, mbarrier rings, wgmma, warp
// specialisation).
//
// One CTA per (kBlockN = 128 keys, kv head, batch); head dims 192 and 256 take 64
// keys and its own consumers (bwd_kernel_split.cuh). Varlen batches: the
// CTA's sequence from cu_seqlens (bwd_seq.cuh). K and V are loaded once
// and stay in shared memory; the CTA steps over every query tile (64 rows;
// 128 at head dim 64; 80 for unmasked head-dim-128 calls, whose dQ runs
// transposed: bwd_kernel_args.hpp, kBwdTallBlockM) of every query head of
// the kv head's GQA group that sees one of its keys.
// Looping the group inside the CTA accumulates dK and dV over the group in
// registers, in a fixed order and without a workspace (the alternative, an
// fp32 dK/dV workspace per query head plus a reduction kernel, costs
// Hq/Hkv x more dK/dV traffic for the same work).
//
// Roles: warpgroup 0 = producer (warp 0: one lane issues TMA, K and V once,
// per step Q and dO into a 2-stage ring; the warp copies the step's
// LSE*log2e and D rows into the same ring stage). Warpgroups 1, 2 = consumers, each owning 64 keys:
//   S^T  = K_w Q^T          wgmma ss (K, Q both K-major)           [64 x 64]
//   dP^T = V_w dO^T         wgmma ss                               [64 x 64]
//   P^T  = exp2(S^T * scale*log2e - LSE*log2e), masked on cut tiles
//   dV  += P^T dO           wgmma rs (P^T from registers, dO MN-major)
//   dS^T = P^T * (dP^T - D)
//   dK  += dS^T Q           wgmma rs (Q MN-major)
//   dS^T -> shared memory (bf16/fp16, 128-byte swizzle), both warpgroups
//   dQ[:, 64w .. 64w+63] = dS K   wgmma ss_tt over all 128 keys (dS^T and K
//                                 MN-major), staged in shared memory and
//                                 added to the fp32 dQ workspace with one
//                                 cp.reduce.async.bulk per tile by warp 1,
//                                 the dQ writer (deterministic mode: warps
//                                 1 and 2, alternate steps)
// The writer is a warp of its own because a warp with bulk operations in
// flight stalls at its next wgmma until they have read shared memory
// (measured: with a consumer warp issuing them, ~22% of the consumers' time
// went to that stall and ~26% to the partner warpgroup waiting at kBarDS).
// The S^T orientation makes P^T and dS^T the register-A operands of dV and
// dK directly (the accumulator layout is the A-fragment layout), so only dS
// goes through shared memory. dK (times scale) and dV are staged in the K/V
// buffers and written by TMA at the end (a varlen sequence's last partial
// 64 keys from registers); the postprocess kernel scales and converts dQ.
#pragma once

#include <cstdint>
#include <type_traits>

#include "block_mask.cuh"
#include "bwd_tile_order.hpp"
#include "bwd_epilogue.cuh"
#include "bwd_kernel_args.hpp"
#include "bwd_kernel_split.cuh"
#include "bwd_ptx.cuh"
#include "bwd_seq.cuh"
#include "score_mod.cuh"
#include "bwd_traits.cuh"
#include "ptx.cuh"
#include "wgmma.cuh"

namespace flashattn::detail::cuda::sm90 {

// Accumulator [64 x N] -> register-A fragments: k-step kk takes columns
// 16kk..16kk+15 = n8 blocks 2kk, 2kk+1 (as the forward's convert_p).
template <class E, int N>
__device__ __forceinline__ void to_a_frags(const float (&x)[N / 2], uint32_t (&f)[N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    f[kk][0] = E::pack(x[8 * kk + 0], x[8 * kk + 1]);
    f[kk][1] = E::pack(x[8 * kk + 2], x[8 * kk + 3]);
    f[kk][2] = E::pack(x[8 * kk + 4], x[8 * kk + 5]);
    f[kk][3] = E::pack(x[8 * kk + 6], x[8 * kk + 7]);
  }
}

// In deterministic mode with a right mask bound (causal, windows) the grid
// runs backwards over the key tiles (BwdKernelArgs::kv_tile_step = -1): the
// adds to a query tile then go from the last key tile that visits it down to
// the first, which lets every CTA start at once (key tile n's query range
// starts later than n - 1's, so the CTAs it waits for, n + 1 ..., reach a
// query tile earlier in their own loops). Without one, every key tile starts
// at query tile 0 and each CTA starts one add's latency after the one before
// it; interleaving kv heads in the grid (heads_interleave_log2) makes those
// chains run side by side. Either way a CTA waits only for CTAs of lower
// block index, which were scheduled first: no cycle.

template <class T>
struct BwdStep {
  int stage;
  uint32_t phase;
  int head, m0;
  // Step `it` of a CTA: query heads outer, query tiles inner.
  __device__ __forceinline__ BwdStep(int it, int hk, int group, const QueryTileRange& qr) {
    stage = it % T::kStages;
    phase = static_cast<uint32_t>(it / T::kStages) & 1u;
    head = hk * group + it / qr.count;
    m0 = (qr.first + it % qr.count) * T::kBlockM;
  }
};

// Producer warp (warp 0): lane 0 issues every TMA load (K, V once; per step
// Q and dO into the ring stage); all 32 lanes copy the step's kBlockM values
// of LSE*log2e and of D into the stage with plain loads and stores (float2s)
// and arrive on its full barrier, whose count is 1 (lane 0's expect_tx) +
// 32. (A cp.async.bulk of those bytes completing on the
// barrier as TMA bytes is the same synchronisation, but compute-sanitizer's
// racecheck flags each consumer read of it, which would hide real hazards.)
template <class T>
__device__ __forceinline__ void bwd_producer(const BwdKernelArgs& a, const BwdSmem<T>& sm, const BwdSeq& seq,
                                             int hk, int c0, int total, const QueryTileRange& qr, int lane) {
  constexpr int kBlockM = T::kBlockM, kBlockN = T::kBlockN;
  if (lane == 0) {
    tma_prefetch_desc(&a.tm_q);
    tma_prefetch_desc(&a.tm_do);
    tma_prefetch_desc(&a.tm_k);
    tma_prefetch_desc(&a.tm_v);
    mbar_arrive_expect_tx(sm.kv_full(), 2 * T::kKVBytes);
#pragma unroll
    for (int at = 0; at < T::kAtoms; ++at) {
      tma_load_4d(sm.k() + at * kBlockN * 128, &a.tm_k, sm.kv_full(), at * 64, seq.k_row + c0, hk, seq.map_b);
      tma_load_4d(sm.v() + at * kBlockN * 128, &a.tm_v, sm.kv_full(), at * 64, seq.k_row + c0, hk, seq.map_b);
    }
  }
  for (int it = 0; it < total; ++it) {
    const BwdStep<T> st(it, hk, a.group, qr);
    mbar_wait(sm.q_empty(st.stage), st.phase ^ 1);
    const uint32_t full = sm.q_full(st.stage);
    if (lane == 0) {
      mbar_arrive_expect_tx(full, 2 * T::kQBytes);
#pragma unroll
      for (int at = 0; at < T::kAtoms; ++at) {
        tma_load_4d(sm.q(st.stage) + at * kBlockM * 128, &a.tm_q, full, at * 64, seq.q_row + st.m0,
                    st.head, seq.map_b);
        tma_load_4d(sm.dout(st.stage) + at * kBlockM * 128, &a.tm_do, full, at * 64, seq.q_row + st.m0,
                    st.head, seq.map_b);
      }
    }
    const int64_t row0 = seq.ws_row(st.head, st.m0);
#pragma unroll
    for (int c = 0; c < (kBlockM + 63) / 64; ++c) {
      const int i = 64 * c + 2 * lane;
      if (kBlockM % 64 != 0 && i >= kBlockM) break;
      const float2 l = *reinterpret_cast<const float2*>(a.lse2 + row0 + i);
      const float2 d = *reinterpret_cast<const float2*>(a.dsum + row0 + i);
      st_shared_f32x2(sm.lse(st.stage) + 4 * i, l.x, l.y);
      st_shared_f32x2(sm.dsum(st.stage) + 4 * i, d.x, d.y);
    }
    mbar_arrive(full);
  }
}

// Deterministic mode: lane 0 of the dQ writer waits for this CTA's turn on
// query tile m0 / kBlockM (the key tiles before it in the grid's order have
// added theirs; see above), adds, and passes the turn on once its add has
// completed. That wait for completion would hold one writer off the next
// step's add, so two writer warps take alternate steps. A CTA's steps add
// to distinct (head, query tile) accumulators, each with a turn counter of
// its own, so the two writers need no order between them.
struct DQTurn {
  int* order;
  int rank;
};
template <class T>
__device__ __forceinline__ DQTurn dq_turn_wait(const BwdKernelArgs& a, const BwdSeq& seq, int head,
                                               int m0, int kv_tile) {
  const int mt = m0 / T::kBlockM;
  // One counter per workspace query tile (its rows are tile-aligned).
  int* order = a.dq_order + seq.ws_row(head, m0) / T::kBlockM;
  const KeyTileRun run =
      key_tiles_of_query_tile<T::kBlockM, T::kBlockN>(seq.mask, seq.len_q, seq.len_k, mt);
  const int rank = a.kv_tile_step < 0 ? run.last - kv_tile : kv_tile - run.first;
  while (ld_acquire_gpu(order) != rank) {
  }
  fence_proxy_async_global();  // the acquire before the async-proxy add
  return {order, rank};
}
__device__ __forceinline__ void dq_turn_pass(const DQTurn& turn) {
  bulk_wait_all();
  fence_proxy_async_global();  // the completed add before the release
  st_release_gpu(turn.order, turn.rank + 1);
}

// dQ writer (warp 1): per step, once both consumer warpgroups have staged
// their halves of the dQ tile (staging tile it % 2), lane 0 adds the whole
// tile to the fp32 accumulator with one bulk reduce-add (the global rows are
// laid out as the tile's, padding included; padding query rows add zeros to
// padding rows). Once the previous step's reduce-add has read its tile, that
// tile goes back to the consumers for step it + 1. Each tile's first
// hand-back is given up front; none beyond the last step. In deterministic
// mode the adds to each query tile are ordered by key tile (dq_order), and
// each step's add has completed before the step ends, so its own tile goes
// back at once (for step it + 2). There, so that one step's wait for that
// completion overlaps the next step's add, warps 1 and 2 each own a staging
// tile and take alternate steps (from `first`, every second step; as
// bwd_dq_writer_split).
template <class T>
__device__ __forceinline__ void bwd_dq_writer(const BwdKernelArgs& a, const BwdSmem<T>& sm,
                                              const BwdSeq& seq, int hk, int kv_tile, int total,
                                              const QueryTileRange& qr, int lane, int first) {
  // One staging tile (80-row steps) only without deterministic mode (the
  // host's block_m_of): there a tile goes back only once its add completed.
  constexpr int kStagesDQ = T::kDQStages;
  static_assert(kStagesDQ == 1 || kStagesDQ == 2, "");
  constexpr int kHeadDim = T::kHeadDim, kPad = T::kDQStride - kHeadDim;
  // The consumers never write the padding columns: zero them once, so the
  // reduce-add moves defined values.
  for (int t = first; t < kStagesDQ; t += 1 + a.det_two_writers) {
#pragma unroll
    for (int h = 0; h < (T::kBlockM + 31) / 32; ++h) {
      if (lane + 32 * h >= T::kBlockM) break;
      const uint32_t row = sm.dq(t) + ((lane + 32 * h) * T::kDQStride + kHeadDim) * 4;
#pragma unroll
      for (int c = 0; c < kPad; c += 2) st_shared_f32x2(row + c * 4, 0.f, 0.f);
    }
  }
  fence_proxy_async_smem();
  __syncwarp();
  for (int t = first; t < kStagesDQ && t < total; t += 1 + a.det_two_writers) {
    named_barrier_arrive(T::kBarDQEmpty + t, T::kDQSyncThreads);
  }
  for (int it = first; it < total; it += 1 + a.det_two_writers) {
    const BwdStep<T> st(it, hk, a.group, qr);
    const int t = it % kStagesDQ;
    named_barrier_sync(T::kBarDQFull + t, T::kDQSyncThreads);
    if (lane == 0) {
      float* tile = a.dq_accum + seq.ws_row(st.head, st.m0) * T::kDQStride;
      if (a.deterministic) {
        const DQTurn turn = dq_turn_wait<T>(a, seq, st.head, st.m0, kv_tile);
        bulk_reduce_add_f32(tile, sm.dq(t), T::kBlockM * T::kDQStride * 4);
        tma_store_commit();
        dq_turn_pass(turn);
      } else {
        bulk_reduce_add_f32(tile, sm.dq(t), T::kBlockM * T::kDQStride * 4);
        tma_store_commit();
        if constexpr (kStagesDQ == 1) {
          bulk_wait_read<0>();  // this step's reduce-add has read the tile
        } else if (it >= 1) {
          bulk_wait_read<1>();  // step it - 1's reduce-add has read tile 1 - t
        }
      }
    }
    __syncwarp();
    if (a.deterministic) {
      // (Handed back after the next step's add, as below, the tile waited for
      // that step's turn as well, and the consumers with it: 2-7% at head
      // dim 128; bench/sm90/NOTES.md.)
      if (it + 2 < total) named_barrier_arrive(T::kBarDQEmpty + t, T::kDQSyncThreads);
    } else if (kStagesDQ == 1) {
      if (it + 1 < total) named_barrier_arrive(T::kBarDQEmpty, T::kDQSyncThreads);
    } else if (it >= 1 && it + 1 < total) {
      named_barrier_arrive(T::kBarDQEmpty + (1 - t), T::kDQSyncThreads);
    }
  }
  if (lane == 0) bulk_wait_all();
}

// dQ writer at head dims 192 and 256 (warp 1): per step, once both consumer
// warpgroups have staged their dQ columns in the step's Q/dO stage
// (bwd_kernel_split.cuh), lane 0 adds the tile's 64 x head_dim floats with
// four bulk reduce-adds (warpgroup w's columns: rows 0-31 from Q's atom
// columns from bwd_split_col0(w) / 64, rows 32-63 from dO's; the accumulator
// holds the tile in that order, bwd_dq_split_offset) and frees the stage for the producer once they have
// read it. In deterministic mode a step's turn passes on only once its adds
// have completed, and a writer waiting for that cannot take the next step:
// there warps 1 and 2 write the steps of stages 0 and 1 (from `first`,
// every second step), so that one step's completion overlaps the next one's
// adds (+1-9% from 2k; with one writer, skipping the turn waits had not
// helped: bench/sm90/NOTES.md).
template <class T>
__device__ __forceinline__ void bwd_dq_writer_split(const BwdKernelArgs& a, const BwdSmem<T>& sm,
                                                    const BwdSeq& seq, int hk, int kv_tile, int total,
                                                    const QueryTileRange& qr, int lane, int first) {
  static_assert(T::kStages == 2, "two writers: writer w adds the steps of stage w");
  for (int it = first; it < total; it += 1 + a.det_two_writers) {
    const BwdStep<T> st(it, hk, a.group, qr);
    named_barrier_sync(T::kBarDQFull + st.stage, T::kDQSyncThreads);
    if (lane == 0) {
      float* tile = a.dq_accum + seq.ws_row(st.head, st.m0) * T::kDQStride;
      DQTurn turn{};
      if (a.deterministic) turn = dq_turn_wait<T>(a, seq, st.head, st.m0, kv_tile);
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        // Warpgroup w's block: 32 rows of bwd_split_cols floats each from Q's
        // and from dO's atom columns at bwd_split_col0(w) (bwd_kernel_split.cuh).
        constexpr int kCol0[2] = {bwd_split_col0(0), bwd_split_col0(1)};
        constexpr int kCols[2] = {bwd_split_cols(T::kHeadDim, 0), bwd_split_cols(T::kHeadDim, 1)};
        const uint32_t off = kCol0[w] / 64 * T::kBlockM * 128, part = 32 * kCols[w] * 4;
        bulk_reduce_add_f32(tile + 64 * kCol0[w], sm.q(st.stage) + off, part);
        bulk_reduce_add_f32(tile + 64 * kCol0[w] + 32 * kCols[w], sm.dout(st.stage) + off, part);
      }
      tma_store_commit();
      bulk_wait_read<0>();
      mbar_arrive(sm.q_empty(st.stage));
      if (a.deterministic) dq_turn_pass(turn);
    }
    __syncwarp();
  }
  if (lane == 0) bulk_wait_all();
}

// Consumer warpgroup cw (0 or 1): keys c0 + 64cw .. c0 + 64cw + 63.
template <class T, bool kVarlen, int kMod>
__device__ __forceinline__ void bwd_consumer(const BwdKernelArgs& a, const BwdSmem<T>& sm,
                                             const BwdSeq& seq, int hk, int c0, int total,
                                             const QueryTileRange& qr, int cw, int tid) {
  constexpr int kBlockM = T::kBlockM, kBlockN = T::kBlockN, kHeadDim = T::kHeadDim;
  using Tag = typename T::MmaTag;
  using E = ElementTraits<typename T::Element>;
  const int warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  // This thread's accumulator rows (keys, local to the CTA): krow and krow + 8.
  const int krow = 64 * cw + 16 * warp + lane / 4;
  // 80-row steps (bwd_kernel_args.hpp): registers are short, see below.
  constexpr bool kTall = T::kSubM == kBwdTallBlockM;
  // Advanced descriptors: on the low word where registers are short
  // (wgmma.cuh, desc_advance_lo). The 64-row kernels keep the 64-bit add:
  // on the low word they measured level overall and 5% slower in causal
  // head-dim-128 calls at 2k-4k (bench/sm90/NOTES.md, "descriptors on the
  // low word").
  auto adv = [](uint64_t d, uint32_t bytes) {
    if constexpr (kTall) {
      return desc_advance_lo(d, bytes);
    } else {
      return desc_advance(d, bytes);
    }
  };

  float dk[kHeadDim / 2], dv[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) dk[i] = dv[i] = 0.f;

  const BlockMask& mask = seq.mask;
  // This thread's key rows past the keys' end (the 80-row steps' mask).
  [[maybe_unused]] const bool key_out[2] = {c0 + krow >= seq.len_k, c0 + krow + 8 >= seq.len_k};
  mbar_wait(sm.kv_full(), 0);
  if (kVarlen && c0 + kBlockN > seq.len_k) {  // bwd_seq.cuh
    zero_rows_past_end<kBlockN, T::kAtoms>(sm.k(), sm.v(), seq.len_k - c0, 128 * cw + tid, 256, T::kBarZero);
  }
  // This warpgroup's 64 rows of K and V as K-major A operands (64 rows of
  // 128 bytes = 8192 bytes into each atom column).
  const uint64_t desc_k = make_desc_sw128(sm.k() + cw * 64 * 128, 16, 1024);
  const uint64_t desc_v = make_desc_sw128(sm.v() + cw * 64 * 128, 16, 1024);
  // dQ's operands, both MN-major: K [key][head dim] as B and dS^T
  // [key][query] as A. Split by columns, this warpgroup's N = 64 head-dim
  // columns are K's atom column cw; split by rows, its 64 query rows are
  // dS^T's atom column cw. Transposed (80-row steps), K's atom column cw is
  // A (M = 64 head-dim columns) and dS^T B (N = 80 queries, two atom
  // columns, LBO apart).
  constexpr bool kSplitRows = T::kDQSplitRows;
  const uint64_t desc_kb =
      make_desc_sw128(sm.k() + (kSplitRows ? 0 : cw) * kBlockN * 128, kBlockN * 128, 1024);
  const uint64_t desc_ds =
      make_desc_sw128(sm.ds() + (kSplitRows ? cw : 0) * kBlockN * 128, kBlockN * 128, 1024);

  for (int it = 0; it < total; ++it) {
    const BwdStep<T> st(it, hk, a.group, qr);
    // ALiBi: this step's query head's slope (0 without ALiBi), natural units.
    [[maybe_unused]] float neg_slope = 0.f;
    if constexpr ((kMod & kModAlibi) != 0) neg_slope = -a.alibi[blockIdx.z * a.alibi_batch_stride + st.head];
    mbar_wait(sm.q_full(st.stage), st.phase);
    if (kVarlen && st.m0 + kBlockM > seq.len_q) {
      zero_rows_past_end<kBlockM, T::kAtoms>(sm.q(st.stage), sm.dout(st.stage), seq.len_q - st.m0,
                                             128 * cw + tid, 256, T::kBarZero);
    }
    const uint64_t desc_q = make_desc_sw128(sm.q(st.stage), 16, 1024);
    const uint64_t desc_do = make_desc_sw128(sm.dout(st.stage), 16, 1024);

    // The step's queries in sub-tiles of kSubM (one of 64 or 80 at head dim
    // 128, two of 64 at 64): S^T, dP^T, dV and dK per sub-tile keep kSubM / 2
    // fp32 values of S^T and of dP^T live instead of kBlockM / 2 each (at
    // 128 query rows those, dK, dV and the fragments exceed the 240
    // registers: ptxas serialized every wgmma). A sub-tile's S^T and dP^T
    // wgmmas queue behind the previous sub-tile's dV and dK. pf/dsf[h] stay
    // live until the wgmmas reading them retire (the next sub-tile's first
    // wait, or dQ's).
    constexpr int kSub = T::kSubTiles, kSubM = T::kSubM, kJ = kSubM / 8, kKs = kSubM / 16;
    uint32_t pf[kSub][kKs][4], dsf[kSub][kKs][4];
    const uint32_t lse_s = sm.lse(st.stage), dsum_s = sm.dsum(st.stage);
    // dO and Q as MN-major B operands of dV and dK (LBO = one atom column).
    const uint64_t desc_do_mn = make_desc_sw128(sm.dout(st.stage), kBlockM * 128, 1024);
    const uint64_t desc_q_mn = make_desc_sw128(sm.q(st.stage), kBlockM * 128, 1024);
#pragma unroll
    for (int h = 0; h < kSub; ++h) {
      const int q0 = st.m0 + kSubM * h;  // the sub-tile's first query
      float s[kSubM / 2], dp[kSubM / 2];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t oa = (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
        const uint32_t ob = (kk / 4) * kBlockM * 128 + h * kSubM * 128 + (kk % 4) * 32;
        Wgmma<kSubM, Tag>::ss(s, adv(desc_k, oa), adv(desc_q, ob), kk > 0);
      }
      wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t oa = (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
        const uint32_t ob = (kk / 4) * kBlockM * 128 + h * kSubM * 128 + (kk % 4) * 32;
        Wgmma<kSubM, Tag>::ss(dp, adv(desc_v, oa), adv(desc_do, ob), kk > 0);
      }
      wgmma_commit();
      // This thread's LSE*log2e values, loaded while the wgmmas run (loads
      // issued after the wait left the exp2 FMAs stalled on them; D's loads
      // stay below, where dV hides them and registers are not short). At 80
      // rows the 20 registers are not there (ptxas serialized every wgmma).
      constexpr int kJEarly = kTall ? 0 : kJ;
      float2 lse[kJ];
#pragma unroll
      for (int j = 0; j < kJEarly; ++j) lse[j] = ld_shared_f32x2(lse_s + (kSubM * h + 8 * j + 2 * t4) * 4);
      wgmma_wait<1>();  // S^T is ready (and the previous sub-tile's dV, dK); dP^T may still run
      fence_operand(s);
      [[maybe_unused]] uint32_t g[kSubM / 4];  // softcap: 1 - tanh^2, for dS
      // score_mod.cuh: natural units (a.scale_log2 = log2 e).
      modify_scores_bwd<kMod>(s, g, a, neg_slope, static_cast<float>(q0 + 2 * t4 + mask.offset - (c0 + krow)));

      // P^T: accumulator element 4j + 2hh + e is key krow + 8hh, query
      // q0 + 8j + 2t4 + e. Padding rows (>= seqlen_q) carry LSE*log2e = +inf.
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const float2 l = j < kJEarly ? lse[j] : ld_shared_f32x2(lse_s + (kSubM * h + 8 * j + 2 * t4) * 4);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          s[4 * j + 2 * hh + 0] = ex2(fmaf(s[4 * j + 2 * hh + 0], a.scale_log2, -l.x));
          s[4 * j + 2 * hh + 1] = ex2(fmaf(s[4 * j + 2 * hh + 1], a.scale_log2, -l.y));
        }
      }
      if constexpr (kTall) {
        // Unmasked calls only (bwd_sm90.cu, block_m_of): the one bound is
        // the keys' end, the same for every query of a key row (the general
        // mask below, per query, left ptxas short of registers for the wgmma
        // pipeline). Rows past the queries' end have P = 0 by their +inf LSE.
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            if (key_out[hh]) s[4 * j + 2 * hh] = s[4 * j + 2 * hh + 1] = 0.f;
          }
        }
      } else if (!tile_is_full<kBlockN>(mask, q0, min(q0 + kSubM, seq.len_q), c0)) {
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int q = q0 + 8 * j + 2 * t4 + e;
            const int lo = mask.lo(q), hi = mask.hi(q);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int key = c0 + krow + 8 * hh;
              if (key < lo || key >= hi) s[4 * j + 2 * hh + e] = 0.f;
            }
          }
        }
      }
      to_a_frags<E, kSubM>(s, pf[h]);
      // 80 rows: P^T for dS^T kept as fp16 pairs (below); with fp16 inputs
      // those are the dV fragments themselves.
      [[maybe_unused]] uint32_t ph[kTall ? kSubM / 4 : 1];
      if constexpr (kTall) {
#pragma unroll
        for (int i = 0; i < kSubM / 4; ++i) {
          ph[i] = std::is_same_v<typename T::Element, __half> ? pf[h][i / 4][i % 4]
                                                               : ElementTraits<__half>::pack(s[2 * i], s[2 * i + 1]);
        }
      }

      // dV += P^T dO.
      fence_operand(dv);
      fence_operand(pf[h]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kKs; ++kk) {
        Wgmma<kHeadDim, Tag>::rs(dv, pf[h][kk], adv(desc_do_mn, (kKs * h + kk) * 16 * 128), 1);
      }
      wgmma_commit();
      wgmma_wait<1>();  // dP^T is ready; dV may still run
      fence_operand(dp);

      // dS^T = P^T (dP^T - D). At 80 rows P^T comes from fp16 pairs (ph)
      // rather than the fp32 S^T registers: S^T, dP^T, dV and dK hold 208 of
      // the 240 registers, and with the fp32 P^T live until here ptxas
      // serialized every wgmma. fp16 keeps 11 bits of P^T in [0, 1]; taken
      // from the bf16 dV fragments (8 bits) the dQ error doubled
      // (bench/sm90/NOTES.md, "Backward: 80-row steps at head dim 128").
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const float2 d = ld_shared_f32x2(dsum_s + (kSubM * h + 8 * j + 2 * t4) * 4);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          float2 pv;
          if constexpr (kTall) {
            pv = unpack_half2(ph[2 * j + hh]);
          } else {
            pv = make_float2(s[4 * j + 2 * hh + 0], s[4 * j + 2 * hh + 1]);
          }
          dp[4 * j + 2 * hh + 0] = pv.x * (dp[4 * j + 2 * hh + 0] - d.x);
          dp[4 * j + 2 * hh + 1] = pv.y * (dp[4 * j + 2 * hh + 1] - d.y);
          if constexpr ((kMod & kModSoftcap) != 0) {
            const float2 gg = unpack_half2(g[2 * j + hh]);
            dp[4 * j + 2 * hh + 0] *= gg.x;
            dp[4 * j + 2 * hh + 1] *= gg.y;
          }
        }
      }
      to_a_frags<E, kSubM>(dp, dsf[h]);

      // dK += dS^T Q.
      fence_operand(dk);
      fence_operand(dsf[h]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kKs; ++kk) {
        Wgmma<kHeadDim, Tag>::rs(dk, dsf[h][kk], adv(desc_q_mn, (kKs * h + kk) * 16 * 128), 1);
      }
      wgmma_commit();

      // dS^T to shared memory, [key][query] in atom columns of 64 queries
      // (this sub-tile's is column h; 80 queries: 64 in column 0, 16 in 1)
      // with the 128-byte swizzle: row r's 16-byte chunk j (queries
      // 8j..8j+7 of its column) sits at chunk j ^ (r % 8).
      // Fragment word (j, hh) is dsf[h][j / 2][2 * (j % 2) + hh]. r % 8 =
      // lane / 4 for both rows (krow, krow + 8) and fills the row's address
      // bits 4-6, so each address is ds_row xor a constant (column and + 8
      // rows are immediate offsets; 32 hoisted addresses had spilled). The
      // previous step's dQ wgmmas (the only readers) retired before its
      // staging.
      const uint32_t ds_row = sm.ds() + krow * 128 + (lane / 4) * 16 + t4 * 4;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          st_shared_u32((ds_row ^ (j % 8 * 16)) + (h + j / 8) * kBlockN * 128 + hh * 8 * 128,
                        dsf[h][j / 2][2 * (j % 2) + hh]);
        }
      }
    }
    fence_proxy_async_smem();  // st.shared -> wgmma reads (async proxy)
    named_barrier_sync(T::kBarDS, 256);

    // This warpgroup's part of dQ = dS K (or of dQ^T = K^T dS^T), over all
    // kBlockN keys.
    constexpr int kDQN = T::kDQN;
    float dq[kDQN / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      if constexpr (T::kDQTransposed) {
        Wgmma<kDQN, Tag>::ss_tt(dq, adv(desc_kb, kk * 16 * 128), adv(desc_ds, kk * 16 * 128),
                                kk > 0);
      } else {
        Wgmma<kDQN, Tag>::ss_tt(dq, adv(desc_ds, kk * 16 * 128), adv(desc_kb, kk * 16 * 128),
                                kk > 0);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operand(dq);
    fence_operand(dv);
    fence_operand(dk);
#pragma unroll
    for (int h = 0; h < kSub; ++h) {
      fence_operand(pf[h]);
      fence_operand(dsf[h]);
    }
    // Every wgmma reading this stage's Q and dO has retired, and this
    // thread's LSE/D reads are done: each consumer thread arrives (one
    // arrival per warp would release only lane 0's reads of the LSE/D rows
    // before the producer warp overwrites them).
    mbar_arrive(sm.q_empty(st.stage));

    // Stage dQ (fp32, padded rows) for the writer, once it has read what
    // this staging tile held kDQStages steps ago.
    const int t = it % T::kDQStages;
    named_barrier_sync(T::kBarDQEmpty + t, T::kDQSyncThreads);
    if constexpr (T::kDQTransposed) {
      // dQ^T element 4j + 2hh + e: head-dim column 64cw + 16warp + lane/4 +
      // 8hh, query 8j + 2t4 + e; one float per store, down the query rows
      // (kDQStride = 4 mod 32 banks: the warp's 32 stores hit 32 banks).
#pragma unroll
      for (int j = 0; j < kDQN / 8; ++j) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int row = 8 * j + 2 * t4 + e;
            const int col = 64 * cw + 16 * warp + lane / 4 + 8 * hh;
            st_shared_u32(sm.dq(t) + (row * T::kDQStride + col) * 4, __float_as_uint(dq[4 * j + 2 * hh + e]));
          }
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < kDQN / 8; ++j) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = (kSplitRows ? 64 * cw : 0) + 16 * warp + lane / 4 + 8 * hh;
          const int col = (kSplitRows ? 0 : 64 * cw) + 8 * j + 2 * t4;
          st_shared_f32x2(sm.dq(t) + (row * T::kDQStride + col) * 4, dq[4 * j + 2 * hh],
                          dq[4 * j + 2 * hh + 1]);
        }
      }
    }
    fence_proxy_async_smem();  // st.shared -> bulk-copy reads (async proxy)
    named_barrier_arrive(T::kBarDQFull + t, T::kDQSyncThreads);
  }

  // dK = scale * sum dS^T Q, dV = sum P^T dO, staged in this warpgroup's
  // rows of the K and V buffers (the 128-byte swizzled layout the maps
  // store from) and written by TMA: the stores leave the CTA asynchronously,
  // where 4-byte stores from registers held its warps ~20% of a short
  // causal call (ncu, 1k tokens). Every warp of both warpgroups must be past
  // its last wgmma first: dQ = dS K reads the other warpgroup's rows of K.
  const int key0 = c0 + 64 * cw;  // this warpgroup's first key
  named_barrier_sync(T::kBarDS, 256);
  // Varlen: a box would write the next sequence's rows past this one's end,
  // so a warpgroup with such rows stores from registers below.
  if (!kVarlen || key0 + 64 <= seq.len_k) {
    stage_dkdv<T, kHeadDim>(sm, dk, dv, krow, t4, 0, a.scale);
    named_barrier_sync(T::kBarEpilogue + cw, 128);
    if (tid == 0 && key0 < seq.len_k) {
      store_dkdv<T>(a, sm, 64 * cw, seq.k_row + key0, hk, seq.map_b, 0, T::kAtoms);
    }
    return;
  }
  // 4-byte stores from registers.
  using Elem = typename T::Element;
  Elem* gdk = static_cast<Elem*>(a.dk) + seq.map_b * a.dk_stride_batch + hk * a.dk_stride_head;
  Elem* gdv = static_cast<Elem*>(a.dv) + seq.map_b * a.dv_stride_batch + hk * a.dv_stride_head;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = c0 + krow + 8 * hh;
    if (key < seq.len_k) {
      Elem* rk = gdk + static_cast<int64_t>(seq.k_row + key) * a.dk_stride_seq + 2 * t4;
      Elem* rv = gdv + static_cast<int64_t>(seq.k_row + key) * a.dv_stride_seq + 2 * t4;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {  // up to the caller's head dims
        if (8 * j < a.head_dim) {
          *reinterpret_cast<uint32_t*>(rk + 8 * j) =
              E::pack(dk[4 * j + 2 * hh] * a.scale, dk[4 * j + 2 * hh + 1] * a.scale);
        }
        if (8 * j < a.head_dim_v) {
          *reinterpret_cast<uint32_t*>(rv + 8 * j) = E::pack(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]);
        }
      }
    }
  }
}

// kVarlen: cu_seqlens batches (bwd_seq.cuh), the grid covering the key
// tiles of the longest sequence. kMod: softcap / ALiBi (score_mod.cuh's bits).
template <class T, bool kVarlen, int kMod = 0>
__global__ void __launch_bounds__(T::kThreads, 1) bwd_kernel(const __grid_constant__ BwdKernelArgs a) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const BwdSmem<T> sm{(smem_u32(smem_raw) + 1023u) & ~1023u};
  const int wg = static_cast<int>(threadIdx.x) / 128;

  // A CTA past the last kv head (deterministic interleave groups that
  // heads_kv does not fill; BwdKernelArgs) has nothing to do, nor, varlen,
  // one whose key tile starts past its sequence's keys: every thread leaves
  // before any barrier.
  if ((static_cast<int>(blockIdx.y) << a.heads_interleave_log2) +
          (static_cast<int>(blockIdx.x) & ((1 << a.heads_interleave_log2) - 1)) >=
      a.heads_kv) {
    return;
  }
  if constexpr (kVarlen) {
    const int kv_tile = a.kv_tile_base + a.kv_tile_step * (static_cast<int>(blockIdx.x) >> a.heads_interleave_log2);
    const int b = static_cast<int>(blockIdx.z);
    if (kv_tile * T::kBlockN >= a.cu_seqlens_k[b + 1] - a.cu_seqlens_k[b]) return;
  }

  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full(), 1);
#pragma unroll
    for (int s = 0; s < T::kStages; ++s) {
      mbar_init(sm.q_full(s), T::kFullArrivals);
      mbar_init(sm.q_empty(s), T::kEmptyArrivals);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // Each role derives the CTA's work after its setmaxnreg: values live
  // across the producer's register decrease would spill.
  auto work = [&](int& hk, int& c0, BwdSeq& seq, QueryTileRange& qr) {
    hk = (static_cast<int>(blockIdx.y) << a.heads_interleave_log2) +
         (static_cast<int>(blockIdx.x) & ((1 << a.heads_interleave_log2) - 1));
    seq = bwd_seq<T::kBlockM, kVarlen>(a, static_cast<int>(blockIdx.z));
    c0 = (a.kv_tile_base + a.kv_tile_step * (static_cast<int>(blockIdx.x) >> a.heads_interleave_log2)) *
         T::kBlockN;
    qr = query_tile_range<T::kBlockM>(seq.mask, seq.len_q, c0, min(T::kBlockN, seq.len_k - c0));
    return qr.count * a.group;  // steps
  };
  int hk, c0, total;
  BwdSeq seq;
  QueryTileRange qr;
  if (wg == 0) {
    setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x < 32) {
      total = work(hk, c0, seq, qr);
      bwd_producer<T>(a, sm, seq, hk, c0, total, qr, static_cast<int>(threadIdx.x));
    } else if (threadIdx.x < 64 || (a.det_two_writers && threadIdx.x < 96)) {
      // The dQ writer; deterministic: warps 1 and 2 take alternate steps.
      total = work(hk, c0, seq, qr);
      const int lane = static_cast<int>(threadIdx.x) % 32, kv_tile = c0 / T::kBlockN;
      const int first = static_cast<int>(threadIdx.x) / 32 - 1;
      if constexpr (T::kSplitHeadDim) {
        bwd_dq_writer_split<T>(a, sm, seq, hk, kv_tile, total, qr, lane, first);
      } else {
        bwd_dq_writer<T>(a, sm, seq, hk, kv_tile, total, qr, lane, first);
      }
    }
  } else {
    setmaxnreg_inc<T::kConsumerRegs>();
    total = work(hk, c0, seq, qr);
    if constexpr (T::kSplitHeadDim) {
      // One instantiation per column count (bwd_split_cols): at 256 both
      // warpgroups run the same code.
      constexpr int kCols0 = bwd_split_cols(T::kHeadDim, 0), kCols1 = bwd_split_cols(T::kHeadDim, 1);
      if (kCols0 == kCols1 || wg == 1) {
        bwd_consumer_split<T, BwdStep<T>, kVarlen, kMod, kCols0>(a, sm, seq, hk, c0, total, qr, wg - 1,
                                                                 static_cast<int>(threadIdx.x) % 128);
      } else {
        bwd_consumer_split<T, BwdStep<T>, kVarlen, kMod, kCols1>(a, sm, seq, hk, c0, total, qr, wg - 1,
                                                                 static_cast<int>(threadIdx.x) % 128);
      }
    } else {
      bwd_consumer<T, kVarlen, kMod>(a, sm, seq, hk, c0, total, qr, wg - 1,
                                         static_cast<int>(threadIdx.x) % 128);
    }
  }
}

}  // namespace flashattn::detail::cuda::sm90
