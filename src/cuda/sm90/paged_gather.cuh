// Paged KV caches with small pages: K/V tiles gathered row by row with
// cp.async instead of TMA boxes (KernelArgs::kv_gather; sm90_forward.cu
// decides when).
//
// Why: a TMA box lies in one page, so a key tile of 16-row pages takes
// kBlockN / 16 boxes per 64-column atom (16 per K or V tile at head dim 128,
// 2 KB each), issued one after another by the producer's one thread; the
// tile then took 1.5-2.6x the contiguous cache's time (bench/NOTES.md). Here
// the producer warpgroup's three idle warps (96 threads) share the tile,
// FlashAttention-3's non-TMA paged path in spirit: each warp copies whole
// 16-row boxes, each lane fixed 16-byte chunks of two of their rows.
//
// Synchronisation: the K/V ring's full barriers count kGatherThreads
// arrivals in this mode (init_barriers); each thread arrives through
// cp.async.mbarrier.arrive.noinc once its copies of the slot have landed.
// The copies are generic-proxy writes and the wgmmas read through the async
// proxy, so the consumers fence the proxies after waiting (kernel.cuh
// wait_kv). The thread-0 producer still loads Q and hands the work tiles
// out; the gather warps receive them as the consumers do (their lane 0 is
// counted on tile_empty) and walk the same key tiles in the same order, so
// both sides of the ring agree on every slot and phase.
#pragma once

#include <cstdint>

#include "block_mask.cuh"
#include "kernel_args.hpp"
#include "mainloop.cuh"
#include "ptx.cuh"
#include "tile_scheduler.cuh"

namespace flashattn::detail::cuda::sm90 {

template <class T>
struct PagedGather {
  static constexpr int kBlockN = T::kBlockN;
  static constexpr int kChunks = T::kHeadDim * 2 / 16;  // 16-byte chunks per row (16-bit elements)
  static constexpr int kBoxes = kBlockN / 16;           // 16-row boxes per tile: one page each
  static_assert(kBlockN % 16 == 0 && kBoxes <= 32, "one lane per 16-row box");
  static_assert(kChunks % 4 == 0, "a lane takes every fourth chunk of two rows");

  // Key tile n's rows: lane j of each warp holds box j's page (rows 16j ..
  // 16j + 15 of the tile lie in one page, as pages are multiples of 16) and
  // the offset that turns a key of the box into its row of that page.
  struct TileRows {
    int page, off;  // this lane's box
    int key0, last;
  };
  __device__ static TileRows rows_of(const KernelArgs& a, const WorkTile& tile, int n, int lane) {
    TileRows t{0, 0, n * kBlockN, tile.seqlen_k - 1};
    if (lane < kBoxes) {
      const int key = min(t.key0 + 16 * lane, t.last);
      t.page = __ldg(a.block_table + static_cast<int64_t>(tile.batch) * a.bt_stride + key / a.page_size);
      t.off = key % a.page_size - key;
    }
    return t;
  }

  // One K or V tile into the ring slot at `dst`, in the layout TMA's
  // 128-byte swizzle writes (atom column c / 8, row r at r * 128, chunk c % 8
  // at position (c % 8) ^ (r % 8)), then this thread's arrival on `bar`.
  // Warp w takes boxes w, w + 3, ...: one page per box. Lane r0 + 8q copies
  // rows r0 and r0 + 8 of a box, chunks q, q + 4, q + 8, ...: its swizzled
  // positions are then q ^ r0 and (q ^ r0) ^ 4 only, so that every copy is
  // a register base plus an immediate (the first version computed each
  // chunk's address and spilled them: 1.5-2.5x the contiguous time).
  // Rows past the sequence's last key and columns past the head dim are
  // zero-filled (no table entry past the sequence's pages is read, and a
  // stale row's NaN never reaches P V).
  // (The bases and strides are read from the kernel's parameters at their
  // use: the producer warpgroup has 24 registers.)
  template <bool kV>
  __device__ static void copy_tile(const KernelArgs& a, int kv_head, const TileRows& t, uint32_t dst,
                                   uint32_t bar, int warp, int lane) {
    const int64_t page_bytes = kV ? a.v_page_bytes : a.k_page_bytes;
    const int64_t row_bytes = kV ? a.v_row_bytes : a.k_row_bytes;
    const int dim_bytes = 2 * (kV ? a.head_dim : a.head_dim_k);
    const char* head_base = (kV ? a.v_base : a.k_base) + kv_head * (kV ? a.v_head_bytes : a.k_head_bytes);
    const int r0 = lane % 8, q = lane / 8;
    // Row r0 of box 0, chunk q; chunk q + 4 (k odd) sits at position ^ 4.
    const uint32_t d_even = dst + r0 * 128 + ((q ^ r0) << 4), d_odd = d_even ^ 64;
    for (int j = warp; j < kBoxes; j += kGatherWarps) {
      const int page = __shfl_sync(0xffffffffu, t.page, j);
      const int off = __shfl_sync(0xffffffffu, t.off, j);
      const int key = t.key0 + 16 * j + r0;  // row r0 of box j; row r0 + 8 is key + 8
      const char* box = head_base + page * page_bytes + q * 16;  // dead rows point here (nothing is read)
      const bool live0 = key <= t.last, live1 = key + 8 <= t.last;
      const char* row0 = live0 ? box + static_cast<int64_t>(key + off) * row_bytes : box;
      const char* row1 = live1 ? box + static_cast<int64_t>(key + 8 + off) * row_bytes : box;
      const uint32_t box_dst = 16 * j * 128;
#pragma unroll
      for (int k = 0; k < kChunks / 4; ++k) {
        const bool col = (q + 4 * k) * 16 < dim_bytes;
        const uint32_t d = ((k % 2) ? d_odd : d_even) + box_dst + (k / 2) * kBlockN * 128;
        cp_async_16(d, row0 + 64 * k, live0 && col ? 16u : 0u);
        cp_async_16(d + 8 * 128, row1 + 64 * k, live1 && col ? 16u : 0u);
      }
    }
    cp_async_mbar_arrive_noinc(bar);
  }

  // The gather threads' share of one work tile: K and V of each key tile
  // from the last to the first, as Mainloop::load issues them.
  __device__ static void load(const KernelArgs& a, const SmemMap<T>& sm, const WorkTile& tile,
                              const KeyTileRange& range, PipeState<T::kStages>& pipe, int gtid) {
    const int kv_head = tile.head / a.group;
    const int warp = gtid / 32, lane = gtid % 32;
    for (int n = range.n_end - 1; n >= range.n_begin; --n) {
      const TileRows t = rows_of(a, tile, n, lane);
      mbar_wait(sm.k_empty(pipe.stage), pipe.phase ^ 1);
      copy_tile<false>(a, kv_head, t, sm.k(pipe.stage), sm.k_full(pipe.stage), warp, lane);
      mbar_wait(sm.v_empty(pipe.stage), pipe.phase ^ 1);
      copy_tile<true>(a, kv_head, t, sm.v(pipe.stage), sm.v_full(pipe.stage), warp, lane);
      pipe.advance();
    }
  }
};

}  // namespace flashattn::detail::cuda::sm90
