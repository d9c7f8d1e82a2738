// Hopper forward kernel: FlashAttention-3 (Shah et al., 2024): §3.1 warp
// specialisation and §3.2's intra-warpgroup overlap of softmax with the
// tensor-core work; §3.2's pingpong schedule between the two consumer
// warpgroups for short key sequences (sm90_forward.cu picks it).
//
// Roles (1 + kConsumerWGs warpgroups, one CTA per SM (two for the 64-row
// tile), walking work tiles (tile_scheduler.cuh)):
//   warpgroup 0  producer: setmaxnreg down to 24 (32 with 3 consumers), one
//                thread issues TMA loads of Q (once per work tile) and K/V
//                tiles into a kStages-deep ring that runs on across tiles;
//                small pages of a paged cache are gathered by its other
//                three warps instead (paged_gather.cuh).
//   warpgroups 1..kConsumerWGs  consumers (2 or 3; 1 in the 64-row tile,
//                two CTAs per SM): setmaxnreg up to 240 (160 with 3, 232
//                with 1); each owns 64 query rows:
//                S = Q K^T (wgmma, both operands in shared memory), mask,
//                online softmax, O += P V (wgmma, P from registers), epilogue.
#pragma once

#include <cstdint>

#include "block_mask.cuh"
#include "epilogue.cuh"
#include "kernel_args.hpp"
#include "kernel_traits.cuh"
#include "mainloop.cuh"
#include "paged_gather.cuh"
#include "ptx.cuh"
#include "score_mod.cuh"
#include "softmax.cuh"
#include "tile_scheduler.cuh"
#include "wgmma.cuh"

namespace flashattn::detail::cuda::sm90 {

// S accumulator -> register-A fragments of P.
// 16-bit: k-step kk of P.V takes key columns 16kk..16kk+15 = n8 blocks 2kk,
// 2kk+1, which the accumulator layout already holds in the order the A
// fragment wants (rows r0/r1, cols +0/+8).
// fp8: k-step kk takes keys 32kk..32kk+31 = n8 blocks 4kk..4kk+3. The A
// fragment wants, per row, 4 consecutive k (bytes) per register: logical
// k = 4t+e (and 16 + 4t+e) of thread t = lane % 4. The accumulator holds keys
// 2t, 2t+1 of each n8 block instead, so logical k = 4t+e is given key
// (e/2)*8 + 2t + e%2 of its 16-key half, and V^T's keys are stored in that
// same order (fp8_v_transpose.cu): the products pair up, no shuffles needed.
template <class T>
__device__ __forceinline__ void convert_p(const float (&s)[T::kBlockN / 2],
                                          uint32_t (&p)[T::kPVSteps][4]) {
  using E = ElementTraits<typename T::Element>;
#pragma unroll
  for (int kk = 0; kk < T::kPVSteps; ++kk) {
    if constexpr (T::kFp8) {
      const float* x = s + 16 * kk;
      p[kk][0] = E::pack4(x[0], x[1], x[4], x[5]);     // row r0, keys +0..15
      p[kk][1] = E::pack4(x[2], x[3], x[6], x[7]);     // row r1
      p[kk][2] = E::pack4(x[8], x[9], x[12], x[13]);   // row r0, keys +16..31
      p[kk][3] = E::pack4(x[10], x[11], x[14], x[15]); // row r1
    } else {
      p[kk][0] = E::pack(s[8 * kk + 0], s[8 * kk + 1]);
      p[kk][1] = E::pack(s[8 * kk + 2], s[8 * kk + 3]);
      p[kk][2] = E::pack(s[8 * kk + 4], s[8 * kk + 5]);
      p[kk][3] = E::pack(s[8 * kk + 6], s[8 * kk + 7]);
    }
  }
}

// The softmax scales and O's factor of one call: fp8 folds the descale
// factors in (the scores are of q * q_descale and k * k_descale, O of
// v * v_descale); 16-bit types use the scales as they are.
struct CallScales {
  float scale, scale_log2, o_mul;
};
template <class T, bool kScoreMod>
__device__ __forceinline__ CallScales call_scales(const KernelArgs& a) {
  // Modified scores are already scaled (score_mod.cuh): the softmax takes
  // them in natural units.
  CallScales c{kScoreMod ? 1.f : a.scale, kScoreMod ? 1.4426950408889634f : a.scale_log2, 1.f};
  if constexpr (T::kFp8) {
    const float qk = (a.q_descale != nullptr ? *a.q_descale : 1.f) *
                     (a.k_descale != nullptr ? *a.k_descale : 1.f);
    c.scale *= qk;
    c.scale_log2 *= qk;
    c.o_mul = a.v_descale != nullptr ? *a.v_descale : 1.f;
  }
  return c;
}

// Varlen: the rows of the first (highest) key tile past the sequence's end
// were loaded from the next sequence (the TMA map spans the packed rows);
// KV cache: they are the cache's stale rows past the sequence's keys (paged:
// rows of its last page, mainloop.cuh KeyPages).
// Their P is 0, but 0 * NaN is NaN: a non-finite value there would reach
// this sequence's output through P V. So the consumers zero those rows of V
// (gathered pages come zero-filled there: paged_gather.cuh)
// (each thread a share, every warpgroup before any of them multiplies by it)
// once it has landed. Padded batches need none of this: TMA fills the rows
// past seqlen_k with zeros.
template <class T, bool kVarlen>
__device__ __forceinline__ void zero_v_past_end(const KernelArgs& a, const SmemMap<T>& sm,
                                                const WorkTile& tile, const KeyTileRange& range,
                                                const PipeState<T::kStages>& pipe, int ctid) {
  constexpr int kBlockN = T::kBlockN, kChunks = 8;  // 16-byte chunks per 128-byte row
  const int c0 = (range.n_end - 1) * kBlockN;
  // fp8 reads V^T from the transpose's workspace, zero past each sequence's
  // keys (fp8_v_transpose.hpp): nothing of the next sequence is loaded.
  if (!kVarlen || T::kFp8 || c0 + kBlockN <= tile.seqlen_k) return;
  const int first = tile.seqlen_k - c0;  // the first row to zero
  mbar_wait(sm.v_full(pipe.stage), pipe.phase);
  const int n = (kBlockN - first) * T::kAtoms * kChunks;
  for (int i = ctid; i < n; i += 128 * T::kConsumerWGs) {
    const int chunk = i % kChunks, row = first + (i / kChunks) % (kBlockN - first),
              at = i / (kChunks * (kBlockN - first));
    st_shared_zero16(sm.v(pipe.stage) + at * kBlockN * 128 + row * 128 + chunk * 16);
  }
  fence_proxy_async_smem();  // st.shared -> the P V wgmmas (async proxy)
  named_barrier_sync(T::kBarVZero, 128 * T::kConsumerWGs);
}

// Consumer warpgroup, one work tile, with FA3's intra-warpgroup overlap
// (§3.2): in iteration i the wgmmas S_i = Q K_i^T and O += P_{i-1} V_{i-1}
// are issued back to back; the softmax of S_i runs while P_{i-1} V_{i-1} is
// still in the tensor cores, and only the O rescale by exp(m_{i-1} - m_i)
// waits for it. O then holds sum_{j<i} P_j V_j at the scale of m_i, ready
// for P_i V_i.
template <class T, bool kVarlen, int kMod>
__device__ __forceinline__ void consumer_tile(const KernelArgs& a, const SmemMap<T>& sm,
                                              const WorkTile& tile, const BlockMask& mask,
                                              const KeyTileRange& range, int r0, int r1, int wg,
                                              int tid, uint32_t tile_iter,
                                              PipeState<T::kStages>& pipe) {
  constexpr int kBlockN = T::kBlockN, kHeadDim = T::kHeadDim;
  using ML = Mainloop<T>;
  using Softmax = OnlineSoftmax<kBlockN, kHeadDim, T::kLazyRescale>;
  const int lane = tid % 32;

  float o[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.f;
  Softmax softmax;
  softmax.init();
  const CallScales sc = call_scales<T, kMod != 0>(a);

  // This thread's two query rows (tile rows t and t + 8: positions r0 + t
  // and r0 + t + 8, or with GQA packing r0 + t / pack_heads, ...) and their
  // visible key ranges.
  const int trow = wg * 64 + (tid / 32) * 16 + lane / 4;
  const int pack = kVarlen ? a.pack_heads : 1;
  const int row0 = r0 + trow / pack, row1 = r0 + (trow + 8) / pack;
  const int lo0 = mask.lo(row0), hi0 = mask.hi(row0);
  const int lo1 = mask.lo(row1), hi1 = mask.hi(row1);
  // ALiBi: this tile's head's slope (0 without ALiBi), in natural units;
  // never with GQA packing (a slope per row), which the host rules out.
  [[maybe_unused]] float neg_slope = 0.f;
  if constexpr ((kMod & kModAlibi) != 0) neg_slope = -a.alibi[tile.batch * a.alibi_batch_stride + tile.head];
  // The score modifications of one tile (score_mod.cuh), then the mask.
  auto mask_tile = [&](float (&s)[kBlockN / 2], int n) {
    const int c0 = n * kBlockN;
    modify_scores_fwd<kMod>(s, a, neg_slope, static_cast<float>(row0 + mask.offset - c0 - 2 * (lane & 3)));
    if (!tile_is_full<kBlockN>(mask, r0, r1, c0)) {
      Softmax::apply_mask(s, c0, lane, lo0, hi0, lo1, hi1);
    }
  };
  // With a separate O buffer, Q's buffer goes back to the producer as soon
  // as this warp's last Q K^T has retired (one arrival per warp).
  auto release_q = [&]() {
    if constexpr (T::kEarlyQRelease) {
      if (lane == 0) mbar_arrive(sm.q_empty());
    }
  };

  // K/V gathered by cp.async (paged_gather.cuh) were written through the
  // generic proxy: fence before the wgmmas read them through the async one.
  const bool gathered = kVarlen && !T::kFp8 && a.kv_gather != 0;
  auto wait_kv = [&](uint32_t full, uint32_t phase) {
    mbar_wait(full, phase);
    if (gathered) fence_proxy_async_smem();
  };

  mbar_wait(sm.q_full(), tile_iter & 1);
  const uint64_t dq = ML::q_desc(sm, wg);

  // Pingpong turns (when T::kPingpong and a.pingpong): warpgroup w waits on
  // barrier kBarScheduler + w before issuing a key tile's wgmmas and then
  // hands the turn to the next one, w + 1 mod kConsumerWGs (256 threads per
  // barrier phase: its own 128 syncing + the previous one's 128 arriving).
  // Every warpgroup of a work tile takes n_tiles turns. Warpgroup 0 gives
  // itself the first turn of each work tile; the last warpgroup skips its
  // last hand-over of the tile, which nobody would consume, so every barrier
  // phase completes. No warpgroup can arrive twice on a barrier before its
  // owner has synced: the next work tile's first turn needs its Q, which the
  // producer loads only once every consumer warp has released the last Q
  // (after its last turn).
  constexpr int kWGs = T::kConsumerWGs;
  const int n_tiles = range.n_end - range.n_begin;
  const bool pingpong = T::kPingpong && (kWGs == 3 || a.pingpong != 0);
  auto sched_sync = [&]() {
    if constexpr (T::kPingpong) {
      if (pingpong) named_barrier_sync(T::kBarScheduler + wg, 256);
    }
  };
  auto sched_arrive = [&](bool last) {
    if constexpr (T::kPingpong) {
      if (pingpong && !(wg == kWGs - 1 && last)) {
        named_barrier_arrive(T::kBarScheduler + (wg + 1 == kWGs ? 0 : wg + 1), 256);
      }
    }
  };
  if constexpr (T::kPingpong) {
    if (pingpong && wg == 0 && n_tiles > 0) named_barrier_arrive(T::kBarScheduler, 256);
  }

  if (n_tiles == 0) release_q();  // no key visible: Q is not read
  if (n_tiles > 0) {
    float s[kBlockN / 2];
    uint32_t p[T::kPVSteps][4];
    float corr[2];
    // K_n's slot goes back to the producer once no wgmma reads it any more
    // (one arrival per warp), Q's buffer with the last key tile.
    auto release_k = [&](bool last) {
      if (lane == 0) mbar_arrive(sm.k_empty(pipe.stage));
      if (last) release_q();
    };

    // The softmax of key tile n after the first (S in s, K_n in k_smem, Q
    // still held). Lazy kernels without score modifiers (kExpFirst:
    // kernel_traits.cuh FLASHATTN_SM90_EXP_FIRST says which; by default fp8
    // and the overlapped loops) take the exponentials first, against the
    // rows' references as they stand (softmax.cuh exp_kept: no row max), and
    // the warpgroup votes on keeping them; with pack_first (the serial loop:
    // P_{i-1} has retired) P is packed in between, so that S's floats are
    // dead across the vote. Kept: corr = 1, s holds P, true. Rarely (a row's
    // max jumps past the lag it allows, a row with no visible key yet) the
    // vote fails: S_n is computed again from K_n and Q (so both are released
    // only after this) and takes the full step with the references moved to
    // the rows' maxima; every tile of the other kernels takes the full step
    // with the lazy rule: false, corr set.
    constexpr bool kExpFirst = T::kExpFirst && kMod == 0;
    auto softmax_tile = [&](int n, uint32_t k_smem, bool pack_first) -> bool {
      mask_tile(s, n);
      if constexpr (kExpFirst) {
        float sum[2];
        const bool keep = softmax.exp_kept(s, sc.scale_log2, sum);
        if (pack_first) {
          convert_p<T>(s, p);
          fence_operand(p);  // here, not after the vote (ptxas would)
        }
        if (named_barrier_all(T::kBarVote + wg, 128, keep)) {
          softmax.commit_kept(sum);
          corr[0] = corr[1] = 1.f;
          return true;
        }
        wgmma_fence();
        ML::issue_qk(s, dq, k_smem);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operand(s);
        mask_tile(s, n);
        // The references move to the rows' maxima: one left behind by the
        // lazy rule (a causal row whose first tile showed it a few keys)
        // would fail every later tile's vote too.
        softmax.template step<true>(s, sc.scale_log2, corr);
        return false;
      }
      softmax.step(s, sc.scale_log2, corr);
      return false;
    };

    // Prologue: S_0 and P_0 (key tiles go from n_end - 1 down to n_begin).
    wait_kv(sm.k_full(pipe.stage), pipe.phase);
    sched_sync();
    wgmma_fence();
    ML::issue_qk(s, dq, sm.k(pipe.stage));
    wgmma_commit();
    sched_arrive(n_tiles == 1);
    wgmma_wait<0>();
    fence_operand(s);
    release_k(n_tiles == 1);
    if (!gathered) zero_v_past_end<T, kVarlen>(a, sm, tile, range, pipe, wg * 128 + tid);
    mask_tile(s, range.n_end - 1);
    softmax.step(s, sc.scale_log2, corr);  // O is still zero: no rescale
    convert_p<T>(s, p);

    if constexpr (!T::kIntraWGOverlap) {
      for (int i = 1; i < n_tiles; ++i) {
        // Serial order (T::kIntraWGOverlap off): O += P_{i-1} V_{i-1} retires
        // before S_i = Q K_i^T is issued, so P and S are never live together
        // (the other warpgroups keep the tensor cores busy meanwhile). A
        // pingpong turn spans both: K_i is waited for before it, so that the
        // turn holds the tensor cores for its two GEMMs only.
        const PipeState<T::kStages> prev = pipe;
        pipe.advance();
        wait_kv(sm.v_full(prev.stage), prev.phase);
        if (pingpong) wait_kv(sm.k_full(pipe.stage), pipe.phase);
        fence_operand(o);
        fence_operand(p);
        sched_sync();
        wgmma_fence();
        ML::issue_pv(o, p, sm.v(prev.stage));
        wgmma_commit();
        wgmma_wait<0>();
        fence_operand(o);
        fence_operand(p);
        if (lane == 0) mbar_arrive(sm.v_empty(prev.stage));
        wait_kv(sm.k_full(pipe.stage), pipe.phase);
        wgmma_fence();
        ML::issue_qk(s, dq, sm.k(pipe.stage));
        wgmma_commit();
        sched_arrive(i == n_tiles - 1);
        wgmma_wait<0>();
        fence_operand(s);
        if (!kExpFirst) release_k(i == n_tiles - 1);
        if (!softmax_tile(range.n_end - 1 - i, sm.k(pipe.stage), true)) {
          Softmax::rescale_o(o, corr);
          convert_p<T>(s, p);
        }
        if (kExpFirst) release_k(i == n_tiles - 1);
      }
    } else {
      for (int i = 1; i < n_tiles; ++i) {
        const PipeState<T::kStages> prev = pipe;
        pipe.advance();
        // Both waits before the fence: control flow between wgmma.fence and a
        // register-A wgmma makes ptxas inject another fence (C7519). V_{i-1}
        // was requested before K_i, so waiting for it here costs nothing.
        wait_kv(sm.k_full(pipe.stage), pipe.phase);
        wait_kv(sm.v_full(prev.stage), prev.phase);
        // Pin the rescaled O and the new P before the fence (the compiler
        // could otherwise sink them past it).
        fence_operand(o);
        fence_operand(p);
        sched_sync();
        wgmma_fence();
        ML::issue_qk(s, dq, sm.k(pipe.stage));
        wgmma_commit();
        ML::issue_pv(o, p, sm.v(prev.stage));
        wgmma_commit();
        sched_arrive(i == n_tiles - 1);
        wgmma_wait<1>();  // S_i is ready; P_{i-1} V_{i-1} may still run
        fence_operand(s);
        if (!kExpFirst) release_k(i == n_tiles - 1);
        // P_{i-1} is still being read: P_i is packed after the wait below.
        const bool kept = softmax_tile(range.n_end - 1 - i, sm.k(pipe.stage), false);
        if (kExpFirst) release_k(i == n_tiles - 1);
        wgmma_wait<0>();
        fence_operand(o);
        fence_operand(p);
        if (lane == 0) mbar_arrive(sm.v_empty(prev.stage));
        if (!kept) Softmax::rescale_o(o, corr);
        convert_p<T>(s, p);
      }
    }

    // Tail: O += P_last V_last.
    wait_kv(sm.v_full(pipe.stage), pipe.phase);
    fence_operand(o);
    fence_operand(p);
    wgmma_fence();
    ML::issue_pv(o, p, sm.v(pipe.stage));
    wgmma_commit();
    wgmma_wait<0>();
    fence_operand(o);
    fence_operand(p);
    if (lane == 0) mbar_arrive(sm.v_empty(pipe.stage));
    pipe.advance();
  }

  float inv[2], lse[2];
  softmax.finalize(sc.scale, inv, lse);
  inv[0] *= sc.o_mul;
  inv[1] *= sc.o_mul;
  Epilogue<T>::template store<kVarlen>(a, sm, tile, wg, tid, o, inv, lse);
}

// kMod: the softcap / ALiBi instantiations (score_mod.cuh's bits; 16-bit
// inputs; launch.cuh picks them).
template <class T, bool kVarlen, int kMod = 0>
__global__ void __launch_bounds__(T::kThreads, T::kCtasPerSm) fwd_kernel(const __grid_constant__ KernelArgs a) {
  using Sched = PersistentTileScheduler;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const SmemMap<T> sm{(smem_u32(smem_raw) + 1023u) & ~1023u};
  // Varlen takes the warpgroup index in its warp-uniform form (ptx.cuh): with
  // the plain one its main loop moved every wgmma descriptor through R2UR (48
  // per iteration at head dim 128, 795 instructions against 709). With it and
  // the TMA epilogue (epilogue.cuh) the varlen kernel runs within 4% of the
  // padded one (it was 11-45% behind). The padded kernel keeps the plain one:
  // the uniform form shortened its loop too (743 -> 724) but measured 3-7%
  // slower at head dim 128, non-causal (bench/sm90/NOTES.md).
  const int wg = kVarlen ? warpgroup_index_uniform() : static_cast<int>(threadIdx.x) / 128;
  // Paged K/V gathered by the producer warpgroup's warps 1-3 (paged_gather.cuh).
  const bool kv_gather = kVarlen && !T::kFp8 && a.kv_gather != 0;
  if (threadIdx.x == 0) Mainloop<T>::init_barriers(sm, kv_gather);
  __syncthreads();

  // The producer thread picks the work tiles and hands them to the
  // consumers (tile_scheduler.cuh); rows and mask are the tile's sequence's.
  auto tile_rows = [&](const WorkTile& tile, int& r0, int& r1) {
    r0 = tile.row0;
    r1 = min(r0 + tile.rows, tile.seqlen_q);
  };
  auto tile_mask = [&](const WorkTile& tile) {
    return BlockMask{tile.seqlen_k - tile.seqlen_q, a.window_left, a.window_right, tile.seqlen_k};
  };
  // The key tiles a work tile visits: its query rows' range, or its piece of
  // that range (split-KV, which runs on the per-sequence kernels).
  auto tile_keys = [&](const WorkTile& tile, const BlockMask& mask, int r0, int r1) {
    const KeyTileRange r = key_tile_range<T::kBlockN>(mask, r0, r1);
    return kVarlen ? split_key_tiles(r, tile.split, a.num_splits) : r;
  };

  // The work tiles as the producer hands them out, until kNoTile (consumer
  // and gather warps; `it` counts the hand-overs).
  auto for_each_tile = [&](auto&& work) {
    for (uint32_t it = 0;; ++it) {
      const int t = Sched::receive(sm, it);
      if (t == Sched::kNoTile) break;
      const WorkTile tile = Sched::template decode<kVarlen, T::kBlockM>(a, t);
      int r0, r1;
      tile_rows(tile, r0, r1);
      work(tile, r0, r1, it);
    }
  };

  if (wg == 0) {
    setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x == 0) {
      tma_prefetch_desc(&a.tm_q);
      tma_prefetch_desc(&a.tm_k);
      tma_prefetch_desc(&a.tm_v);
      tma_prefetch_desc(&a.tm_o);
      PipeState<T::kStages> pipe;
      uint32_t it = 0;
      for (int t = Sched::first(); t < a.num_tiles; t = Sched::next(a, t)) {
        const WorkTile tile = Sched::template decode<kVarlen, T::kBlockM>(a, t);
        if (!tile.active()) continue;
        Sched::publish(sm, it, t);
        int r0, r1;
        tile_rows(tile, r0, r1);
        Mainloop<T>::template load<kVarlen>(a, sm, tile, tile_keys(tile, tile_mask(tile), r0, r1), it++, pipe);
      }
      Sched::publish(sm, it, Sched::kNoTile);
    } else if (kv_gather && threadIdx.x >= 32) {
      if constexpr (kVarlen && !T::kFp8) {
        PipeState<T::kStages> pipe;
        for_each_tile([&](const WorkTile& tile, int r0, int r1, uint32_t) {
          PagedGather<T>::load(a, sm, tile, tile_keys(tile, tile_mask(tile), r0, r1), pipe,
                               static_cast<int>(threadIdx.x) - 32);
        });
      }
    }
  } else {
    setmaxnreg_inc<T::kConsumerRegs>();
    const int tid = static_cast<int>(threadIdx.x) % 128;
    PipeState<T::kStages> pipe;
    for_each_tile([&](const WorkTile& tile, int r0, int r1, uint32_t it) {
      const BlockMask mask = tile_mask(tile);
      consumer_tile<T, kVarlen, kMod>(a, sm, tile, mask, tile_keys(tile, mask, r0, r1), r0,
                                          r1, wg - 1, tid, it, pipe);
    });
    Epilogue<T>::drain(tid);
  }
}

}  // namespace flashattn::detail::cuda::sm90
