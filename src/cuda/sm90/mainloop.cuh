// Mainloop: the producer's TMA loads and the consumers' two GEMMs per key tile.
//
// Pipeline: Q is loaded once per work tile (q_full; q_empty gives its buffer
// back, see kernel_traits.cuh kSeparateO). K and V each cycle through kStages
// shared-memory slots with a full barrier (producer arrive.expect_tx + TMA
// complete_tx, arrival count 1) and an empty barrier (one arrival per
// consumer warp once its wgmma reading the slot has retired). Slot s's use u
// (u = 0, 1, ...) waits on full-phase parity u&1 and, for the producer, on
// empty-phase parity (u-1)&1 — a fresh barrier treats parity 1 as complete,
// so the first pass does not block.
//
// The key tiles are visited from the last to the first, so the diagonal tiles
// of a causal mask (the only ones needing a per-element mask) come first.
#pragma once

#include <cstdint>

#include "block_mask.cuh"
#include "fp8_v_transpose.hpp"
#include "kernel_args.hpp"
#include "kernel_traits.cuh"
#include "ptx.cuh"
#include "tile_scheduler.cuh"
#include "wgmma.cuh"

namespace flashattn::detail::cuda::sm90 {

template <class T>
struct SmemMap {
  uint32_t base;  // 1024-aligned shared-window address
  __device__ __forceinline__ uint32_t q() const { return base + T::kQOff; }
  __device__ __forceinline__ uint32_t k(int s) const { return base + T::kKOff + s * T::kKVBytes; }
  __device__ __forceinline__ uint32_t v(int s) const { return base + T::kVOff + s * T::kKVBytes; }
  __device__ __forceinline__ uint32_t bar(int i) const { return base + T::kBarOff + 8 * i; }
  // Epilogue staging buffer for O (aliases Q when !kSeparateO).
  __device__ __forceinline__ uint32_t o() const {
    return T::kSeparateO ? base + T::kOOff : base + T::kQOff;
  }
  __device__ __forceinline__ uint32_t q_full() const { return bar(0); }
  __device__ __forceinline__ uint32_t q_empty() const { return bar(1); }
  __device__ __forceinline__ uint32_t k_full(int s) const { return bar(2 + s); }
  __device__ __forceinline__ uint32_t k_empty(int s) const { return bar(2 + T::kStages + s); }
  __device__ __forceinline__ uint32_t v_full(int s) const { return bar(2 + 2 * T::kStages + s); }
  __device__ __forceinline__ uint32_t v_empty(int s) const { return bar(2 + 3 * T::kStages + s); }
  // The producer's hand-over of work tiles to the consumers (two slots).
  __device__ __forceinline__ uint32_t tile_full(int s) const { return bar(2 + 4 * T::kStages + s); }
  __device__ __forceinline__ uint32_t tile_empty(int s) const { return bar(4 + 4 * T::kStages + s); }
  __device__ __forceinline__ uint32_t tile_slot(int s) const { return base + T::kTileSlotOff + 4 * s; }
};

// Paged K/V gathered by cp.async (paged_gather.cuh): the producer
// warpgroup's warps 1-3.
constexpr int kGatherWarps = 3;
constexpr int kGatherThreads = 32 * kGatherWarps;

// Position in the K/V ring; it carries over from one work tile to the next.
template <int kStages>
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// Paged KV cache: the pages of one key tile's boxes of a.page_rows rows (a
// divisor of both the page and the tile, 16 at least: whole 1024-byte swizzle
// periods), read from the block table in one batch before the producer waits
// for K's ring slot and kept for V's loads. (Read box by box, each read
// waited for the previous box's TMA issue, whose asm orders memory: 16
// dependent L2 round trips per key tile, 3x the contiguous cache's time at
// 16-row pages.) Boxes past the sequence's keys read rows of its last page
// again: their scores are masked and their V rows zeroed (kernel.cuh
// zero_v_past_end), and no table entry past the sequence's pages is read.
// The pages spill from the producer's 24 registers into local memory (L1);
// the consumers' code is unchanged (SASS, bench/NOTES.md).
template <class T>
struct KeyPages {
  static constexpr int kMaxBoxes = T::kBlockN / 16;
  int page[kMaxBoxes];
  int key0;

  __device__ __forceinline__ void read(const KernelArgs& a, const WorkTile& tile, int n) {
    const int* bt = a.block_table + static_cast<int64_t>(tile.batch) * a.bt_stride;
    key0 = n * T::kBlockN;
    const int last = tile.seqlen_k - 1;
#pragma unroll
    for (int j = 0; j < kMaxBoxes; ++j) {
      const int r = j * a.page_rows;
      page[j] = r < T::kBlockN ? __ldg(bt + min(key0 + r, last) / a.page_size) : 0;
    }
  }
  // K's or V's tile: each box's 128-byte atom columns at its rows of the tile.
  __device__ __forceinline__ void issue(const KernelArgs& a, const CUtensorMap* map, uint32_t dst,
                                        uint32_t bar, int kv_head) const {
#pragma unroll
    for (int j = 0; j < kMaxBoxes; ++j) {
      const int r = j * a.page_rows;
      if (r >= T::kBlockN) break;
#pragma unroll
      for (int at = 0; at < T::kAtoms; ++at) {
        tma_load_4d(dst + at * T::kBlockN * 128 + r * 128, map, bar, at * T::kAtomElems,
                    (key0 + r) % a.page_size, kv_head, page[j]);
      }
    }
  }
};

template <class T>
struct Mainloop {
  static constexpr int kBlockM = T::kBlockM, kBlockN = T::kBlockN, kHeadDim = T::kHeadDim;
  static constexpr int kAtoms = T::kAtoms, kStages = T::kStages;

  // One thread, before the CTA-wide barrier that publishes them. With paged
  // K/V gathered by cp.async (paged_gather.cuh) each gather thread arrives
  // on the full barriers and each gather warp takes the work tiles too.
  __device__ static void init_barriers(const SmemMap<T>& sm, bool kv_gather) {
    mbar_init(sm.q_full(), 1);
    mbar_init(sm.q_empty(), T::kQEmptyArrivals);
    const uint32_t kv_full = kv_gather ? kGatherThreads : 1;
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(sm.k_full(s), kv_full);
      mbar_init(sm.v_full(s), kv_full);
      mbar_init(sm.k_empty(s), T::kEmptyArrivals);
      mbar_init(sm.v_empty(s), T::kEmptyArrivals);
    }
    for (int s = 0; s < 2; ++s) {
      mbar_init(sm.tile_full(s), 1);
      mbar_init(sm.tile_empty(s), T::kEmptyArrivals + (kv_gather ? kGatherWarps : 0));
    }
    fence_barrier_init();
  }

  // Producer, one work tile: one elected thread issues every copy.
  // Coordinates are {head_dim, seq, head, batch}; each 64-wide atom column is
  // one box, landing rows*128 bytes after the previous one. `tile_iter` is
  // this CTA's work-tile count so far: Q's buffer is reused once per tile.
  // Order: K_0, Q, V_0, K_1, V_1, ... — K_0's ring slot frees up before Q's
  // buffer does, so it goes first and the first S = Q K^T only waits for Q.
  // kVarlen: the per-sequence kernels, which also take paged KV caches
  // (a.block_table) and pack GQA groups (a.pack_heads); 16-bit only.
  template <bool kVarlen>
  __device__ static void load(const KernelArgs& a, const SmemMap<T>& sm, const WorkTile& tile,
                              const KeyTileRange& range, uint32_t tile_iter,
                              PipeState<kStages>& pipe) {
    const int kv_head = tile.head / a.group;
    // The 16-bit per-sequence kernels take paged caches and GQA packing.
    constexpr bool kPerSequence = kVarlen && !T::kFp8;
    const bool paged = kPerSequence && a.block_table != nullptr;
    // Gathered pages: the gather warps load K and V (paged_gather.cuh).
    const bool any = range.n_end > range.n_begin && !(kPerSequence && a.kv_gather);
    KeyPages<T> pages;  // paged: tile n's, from load_k(n) to load_v(n)
    auto load_k = [&](int n) {
      if constexpr (kPerSequence) {
        if (paged) pages.read(a, tile, n);
      }
      mbar_wait(sm.k_empty(pipe.stage), pipe.phase ^ 1);
      mbar_arrive_expect_tx(sm.k_full(pipe.stage), T::kKVBytes);
      if constexpr (kPerSequence) {
        if (paged) return pages.issue(a, &a.tm_k, sm.k(pipe.stage), sm.k_full(pipe.stage), kv_head);
      }
#pragma unroll
      for (int at = 0; at < kAtoms; ++at) {
        tma_load_4d(sm.k(pipe.stage) + at * kBlockN * 128, &a.tm_k, sm.k_full(pipe.stage),
                    at * T::kAtomElems, tile.k_off + n * kBlockN, kv_head, tile.kv_map_batch);
      }
    };
    auto load_v = [&](int n) {
      mbar_wait(sm.v_empty(pipe.stage), pipe.phase ^ 1);
      mbar_arrive_expect_tx(sm.v_full(pipe.stage), T::kKVBytes);
      if constexpr (kPerSequence) {
        if (paged) return pages.issue(a, &a.tm_v, sm.v(pipe.stage), sm.v_full(pipe.stage), kv_head);
      }
      if constexpr (T::kFp8) {
        // V^T [batch, heads_kv, head_dim, keys]: boxes of 128 head-dim rows
        // of the tile's 128 keys (one swizzle atom per row), like K's.
        // Varlen: [1, heads_kv, head_dim, keys], the sequence's keys from
        // fp8_vt_seq_start (fp8_v_transpose.hpp).
        const int key0 = (kVarlen && a.cu_seqlens_k != nullptr ? static_cast<int>(fp8_vt_seq_start(tile.k_off, tile.batch))
                                                               : 0) +
                         n * kBlockN;
#pragma unroll
        for (int r = 0; r < kHeadDim; r += kFp8VtBoxRows) {
          tma_load_4d(sm.v(pipe.stage) + r * 128, &a.tm_v, sm.v_full(pipe.stage), key0, r, kv_head,
                      tile.kv_map_batch);
        }
      } else {
#pragma unroll
        for (int at = 0; at < kAtoms; ++at) {
          tma_load_4d(sm.v(pipe.stage) + at * kBlockN * 128, &a.tm_v, sm.v_full(pipe.stage),
                      at * 64, tile.k_off + n * kBlockN, kv_head, tile.kv_map_batch);
        }
      }
    };
    if (any) load_k(range.n_end - 1);
    mbar_wait(sm.q_empty(), (tile_iter & 1) ^ 1);
    // GQA packing: whole groups only (the rows past them stay empty).
    const bool packed = kPerSequence && a.pack_heads > 1;
    mbar_arrive_expect_tx(sm.q_full(), packed ? kBlockM / a.pack_heads * a.pack_heads * T::kAtoms * 128
                                              : T::kQBytes);
    if (packed) {  // the group's heads, interleaved
#pragma unroll
      for (int at = 0; at < kAtoms; ++at) {
        tma_load_5d(sm.q() + at * kBlockM * 128, &a.tm_q, sm.q_full(), at * T::kAtomElems, 0,
                    tile.q_off + tile.row0, kv_head, tile.map_batch);
      }
    } else {
#pragma unroll
      for (int at = 0; at < kAtoms; ++at) {
        tma_load_4d(sm.q() + at * kBlockM * 128, &a.tm_q, sm.q_full(), at * T::kAtomElems,
                    tile.q_off + tile.row0, tile.head, tile.map_batch);
      }
    }
    if (!any) return;
    load_v(range.n_end - 1);
    pipe.advance();
    for (int n = range.n_end - 2; n >= range.n_begin; --n) {
      load_k(n);
      load_v(n);
      pipe.advance();
    }
  }

  // Descriptor of this warpgroup's 64 rows of Q (A operand, K-major).
  __device__ static uint64_t q_desc(const SmemMap<T>& sm, int consumer_wg) {
    return make_desc_sw128(sm.q() + consumer_wg * 64 * 128, 16, 1024);
  }

  // S = Q K^T for one key tile: kQKSteps wgmmas, issued and not waited.
  // Each k-step is 32 bytes of a row (16 16-bit or 32 fp8 elements), four
  // per swizzle atom.
  __device__ static void issue_qk(float (&s)[kBlockN / 2], uint64_t dq, uint32_t k_smem) {
    const uint64_t dk = make_desc_sw128(k_smem, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < T::kQKSteps; ++kk) {
      const uint32_t qa = (kk / 4) * kBlockM * 128 + (kk % 4) * 32;
      const uint32_t kb = (kk / 4) * kBlockN * 128 + (kk % 4) * 32;
      Wgmma<kBlockN, typename T::MmaTag>::ss(s, desc_advance(dq, qa), desc_advance(dk, kb),
                                              kk > 0 ? 1 : 0);
    }
  }

  // O += P V: kPVSteps wgmmas, P from registers (one k-step = 4 registers).
  // 16-bit: V MN-major (LBO = one atom column = kBlockN*128 bytes), a k-step
  // is 16 rows. fp8: V^T K-major (kHeadDim rows of the tile's 128 keys), a
  // k-step is 32 bytes of each row, like S = Q K^T's.
  __device__ static void issue_pv(float (&o)[kHeadDim / 2], const uint32_t (&p)[T::kPVSteps][4],
                                  uint32_t v_smem) {
    if constexpr (T::kFp8) {
      const uint64_t dv = make_desc_sw128(v_smem, 16, 1024);
#pragma unroll
      for (int kk = 0; kk < T::kPVSteps; ++kk) {
        Wgmma<kHeadDim, typename T::MmaTag>::rs(o, p[kk], desc_advance(dv, kk * 32), 1);
      }
    } else {
      const uint64_t dv = make_desc_sw128(v_smem, kBlockN * 128, 1024);
#pragma unroll
      for (int kk = 0; kk < T::kPVSteps; ++kk) {
        Wgmma<kHeadDim, typename T::MmaTag>::rs(o, p[kk], desc_advance(dv, kk * 16 * 128), 1);
      }
    }
  }
};

}  // namespace flashattn::detail::cuda::sm90
