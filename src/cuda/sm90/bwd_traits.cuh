// Compile-time configuration of the Hopper backward: tile shape, warp roles,
// register budgets, shared-memory map. See bwd_kernel.cuh for the algorithm.
#pragma once

#include <cstdint>

#include "bwd_kernel_args.hpp"
#include "kernel_traits.cuh"  // ElementTraits (MMA tag, fp32 -> 16-bit pack)

namespace flashattn::detail::cuda::sm90 {

// kBlockM_: query rows per step, bwd_block_m's, or kBwdTallBlockM at head
// dim 128 (bwd_kernel_args.hpp).
template <class Element_, int kHeadDim_, int kBlockM_ = bwd_block_m(kHeadDim_)>
struct BwdTraits {
  using Element = Element_;
  using MmaTag = typename ElementTraits<Element>::MmaTag;

  static constexpr int kHeadDim = kHeadDim_;
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 192 || kHeadDim == 256,
                "the sm90 backward is built for head_dim 64, 128, 192, 256");
  static constexpr int kAtoms = kHeadDim / 64;  // 64-column (128-byte) swizzle atoms per row
  static constexpr int kBlockM = kBlockM_;  // query rows per step
  static_assert(kBlockM == bwd_block_m(kHeadDim) || (kBlockM == kBwdTallBlockM && bwd_tall_steps_built(kHeadDim)),
                "");
  static constexpr int kBlockN = bwd_block_n(kHeadDim);  // keys per CTA
  // Head dims 192 and 256 (bwd_kernel_split.cuh): 64 keys per CTA, S^T and
  // dP^T split by query halves between the consumer warpgroups, P^T and dS^T
  // through shared memory, dV, dK and dQ split by columns (128 + 64 or
  // 128 + 128: bwd_split_cols), dQ staged in the step's Q/dO stage. Head dims 64 and 128 (bwd_kernel.cuh): each
  // warpgroup owns 64 of the 128 keys, P^T and dS^T stay in registers, dQ
  // is staged in a tile of its own.
  static constexpr bool kSplitHeadDim = bwd_split_head_dim(kHeadDim);
  // dQ [kBlockM x kHeadDim] = dS K over the kBlockN keys, one 64-row wgmma
  // per consumer warpgroup: with 64 query rows each warpgroup takes half of
  // the head-dim columns (one atom column of K at 128, two at 256); with 128
  // rows each takes its 64 rows (one atom column of dS^T) and every column.
  // With 80 rows (no multiple of 64) dQ runs transposed, dQ^T = K^T dS^T:
  // each warpgroup's 64 head-dim columns are the wgmma's M, the 80 queries
  // its N.
  static constexpr bool kDQSplitRows = kBlockM == 128;
  static constexpr bool kDQTransposed = kBlockM == kBwdTallBlockM;
  static_assert(kDQSplitRows ? kAtoms == 1 : ((kBlockM == 64 || kDQTransposed) && kAtoms >= 2), "");
  static constexpr int kDQN = kDQTransposed ? kBlockM : kDQSplitRows ? kHeadDim : kHeadDim / 2;  // dQ wgmma N
  static constexpr int kStages = 2;           // Q/dO/LSE/D ring depth
  static constexpr int kSubTiles = kBlockM == 128 ? 2 : 1;  // query sub-tiles per step (bwd_kernel.cuh)
  static constexpr int kSubM = kBlockM / kSubTiles;          // their rows: 64 or 80

  // Warpgroup 0 produces: warp 0 loads (TMA), warp 1 writes dQ (bulk
  // reduce-add of the staged tile). Warpgroups 1 and 2 each own 64 of the
  // kBlockN keys: S^T, dP^T, dV and dK for their keys, and half of dQ
  // (kDQSplitRows).
  static constexpr int kConsumerWGs = 2;
  static_assert(kSplitHeadDim ? kBlockN == 64 && kBlockM == 64 : kConsumerWGs * 64 == kBlockN, "");
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  static constexpr uint32_t kProducerRegs = 24;
  static constexpr uint32_t kConsumerRegs = 240;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumerWGs <= 65536, "");

  static constexpr int kKVBytes = kBlockN * kHeadDim * 2;  // K or V
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;   // one Q or dO stage
  static constexpr int kRowBytes = kBlockM * 4;            // one stage of LSE or D
  // dS^T (or P^T) [key][query] in atom columns of 64 queries, 128 bytes per
  // key each (80 queries take a second column, a quarter of it used).
  static constexpr int kDSBytes = kBlockN * 128 * ((kBlockM + 63) / 64);
  // kSplitHeadDim: P^T and dS^T double-buffered (a step's writes cannot
  // reach the buffers that the other warpgroup's wgmmas of the step before
  // may still read); dQ is staged in the step's own Q/dO stage, whose half
  // (per warpgroup) the warpgroup's last reader (dV_w, dK_w) has retired.
  static constexpr int kPDSBufs = kSplitHeadDim ? 2 : 1;
  static constexpr int kPBytes = kSplitHeadDim ? kDSBytes : 0;
  // dQ staging for the bulk reduce-add, fp32 [query][kHeadDim + 8]: the pad
  // of 8 floats puts rows 8 banks apart, so a warp's float2 stores (8 rows x
  // 4 lanes) fill 32 banks twice, the minimum. The global accumulator has the
  // same rows, so one bulk reduce-add moves a whole tile.
  static constexpr int kDQStride = bwd_dq_stride(kHeadDim, kBlockM);  // floats
  static constexpr int kDQBytes = kBlockM * kDQStride * 4;
  // Two staging tiles: the consumers fill one while the writer's reductions
  // still read the other (with one, they waited ~22% of their time for it,
  // when the writer issued 64 row reductions per tile). The 80-row steps
  // have room for one only: its single bulk reduce-add has read it long
  // before the next step's staging.
  static constexpr int kDQStages = kSplitHeadDim ? 0 : kDQTransposed ? 1 : 2;

  // Shared memory (byte offsets from a 1024-aligned base; every wgmma/TMA
  // tile starts 1024-aligned, see wgmma.cuh).
  static constexpr int kKOff = 0;
  static constexpr int kVOff = kKOff + kKVBytes;
  static constexpr int kQOff = kVOff + kKVBytes;
  static constexpr int kDOOff = kQOff + kStages * kQBytes;
  static constexpr int kDSOff = kDOOff + kStages * kQBytes;
  static constexpr int kPOff = kDSOff + kPDSBufs * kDSBytes;
  static constexpr int kDQOff = kPOff + kPDSBufs * kPBytes;
  static constexpr int kLseOff = kDQOff + kDQStages * kDQBytes;
  static constexpr int kDsumOff = kLseOff + kStages * kRowBytes;
  static constexpr int kBarOff = kDsumOff + kStages * kRowBytes;
  // Barriers: kv_full, q_full[kStages], q_empty[kStages].
  static constexpr int kNumBars = 1 + 2 * kStages;
  static constexpr int kSmemBytes = kBarOff + 8 * kNumBars + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "exceeds the sm90 per-block shared memory");
  static_assert(kDQOff % 1024 == 0 && kDSOff % 1024 == 0 && kQBytes % 1024 == 0, "");

  // One arrival per consumer thread frees a stage (at head dims 192, 256 also the
  // arrival of the dQ writer that added the dQ staged there, once its
  // reduce-adds have read it; deterministic mode has two writers, one per
  // stage); a
  // stage is full after
  // lane 0's expect_tx arrival (plus its TMA bytes) and the 32 arrivals of
  // the producer warp that copied its LSE/D rows.
  static constexpr uint32_t kEmptyArrivals = 128 * kConsumerWGs + (kSplitHeadDim ? 1 : 0);
  static constexpr uint32_t kFullArrivals = 1 + 32;
  // Named barriers (0 is __syncthreads). kBarDS: over the 256 consumer
  // threads, both halves of dS^T (and at head dims 192, 256 of P^T) are in smem. kBarDQFull + t / kBarDQEmpty +
  // t: the consumers and the dQ-writer warp hand staging tile t back and
  // forth (consumers arrive on full and sync on empty, the writer the reverse;
  // with two writers, writer w alone uses tile or stage w's barriers).
  // kSplitHeadDim: kBarDQFull + stage, both warpgroups' dQ halves are staged
  // in that Q/dO stage.
  static constexpr uint32_t kBarDS = 1;
  static constexpr uint32_t kBarDQFull = 2;
  static constexpr uint32_t kBarDQEmpty = kBarDQFull + kDQStages;
  static constexpr uint32_t kDQSyncThreads = 128 * kConsumerWGs + 32;
  // kSplitHeadDim: kBarWG + w, the 128 threads of consumer warpgroup w.
  static constexpr uint32_t kBarWG = kBarDQFull + kStages;
  // Varlen: the 256 consumer threads have zeroed the rows of a K/V or Q/dO
  // tile past the sequence's end (bwd_seq.cuh).
  static constexpr uint32_t kBarZero = kBarWG + kConsumerWGs;
  // kBarEpilogue + w: warpgroup w's dK/dV are staged for its TMA stores.
  static constexpr uint32_t kBarEpilogue = kBarZero + 1;
  static_assert(kBarEpilogue + kConsumerWGs <= 16 && kBarDQEmpty + kDQStages <= kBarZero, "16 named barriers");
};

template <class T>
struct BwdSmem {
  uint32_t base;  // 1024-aligned shared-window address
  __device__ __forceinline__ uint32_t k() const { return base + T::kKOff; }
  __device__ __forceinline__ uint32_t v() const { return base + T::kVOff; }
  __device__ __forceinline__ uint32_t q(int s) const { return base + T::kQOff + s * T::kQBytes; }
  __device__ __forceinline__ uint32_t dout(int s) const { return base + T::kDOOff + s * T::kQBytes; }
  __device__ __forceinline__ uint32_t ds(int i = 0) const { return base + T::kDSOff + i * T::kDSBytes; }
  __device__ __forceinline__ uint32_t p(int i) const { return base + T::kPOff + i * T::kPBytes; }
  __device__ __forceinline__ uint32_t dq(int t) const { return base + T::kDQOff + t * T::kDQBytes; }
  __device__ __forceinline__ uint32_t lse(int s) const { return base + T::kLseOff + s * T::kRowBytes; }
  __device__ __forceinline__ uint32_t dsum(int s) const { return base + T::kDsumOff + s * T::kRowBytes; }
  __device__ __forceinline__ uint32_t bar(int i) const { return base + T::kBarOff + 8 * i; }
  __device__ __forceinline__ uint32_t kv_full() const { return bar(0); }
  __device__ __forceinline__ uint32_t q_full(int s) const { return bar(1 + s); }
  __device__ __forceinline__ uint32_t q_empty(int s) const { return bar(1 + T::kStages + s); }
};

}  // namespace flashattn::detail::cuda::sm90
