// Epilogue, per consumer warpgroup: O = acc / l in the output dtype, staged
// in shared memory in the 128-byte-swizzled layout TMA expects, then written
// by TMA stores that drop rows past seqlen_q; LSE (natural log, fp32)
// straight from registers by one lane per row.
//
// Staging buffer (kernel_traits.cuh kSeparateO): its own buffer when it fits;
// the store is then left in flight and only waited for before the buffer is
// written again (next tile) or the CTA exits. Otherwise this warpgroup's
// rows of Q's buffer, given back to the producer (q_empty) once the store
// has read them.
#pragma once

#include <cstdint>

#include "kernel_args.hpp"
#include "kernel_traits.cuh"
#include "mainloop.cuh"
#include "ptx.cuh"
#include "softmax.cuh"
#include "tile_scheduler.cuh"

namespace flashattn::detail::cuda::sm90 {

// The query position and head of a thread's two rows (tile rows t, t + 8):
// position tile.row0 + t of tile.head, or with GQA packing (KernelArgs::
// pack_heads) position tile.row0 + t / pack_heads of head tile.head + t %
// pack_heads; a row past the tile's whole groups gets position -1 (not
// stored: it holds no query).
struct RowPlace {
  int pos[2], head[2];
  __device__ __forceinline__ RowPlace(const WorkTile& tile, int t, int pack) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int u = t + 8 * r, p = u / pack;
      pos[r] = p < tile.rows ? tile.row0 + p : -1;
      head[r] = tile.head + u % pack;
    }
  }
};

template <class T>
struct Epilogue {
  static constexpr int kHeadDim = T::kHeadDim, kBlockM = T::kBlockM;

  // wg: consumer warpgroup (0/1); tid: thread index within it.
  template <bool kVarlen>
  __device__ static void store(const KernelArgs& a, const SmemMap<T>& sm, const WorkTile& tile,
                               int wg, int tid, const float (&o)[kHeadDim / 2],
                               const float (&inv)[2], const float (&lse)[2]) {
    const int warp = tid / 32, lane = tid % 32;
    const int row0 = wg * 64 + warp * 16 + lane / 4;  // row within the CTA tile; row1 = row0 + 8
    const int pack = kVarlen ? a.pack_heads : 1;
    const RowPlace rp(tile, row0, pack);
    if (kVarlen && a.o_accum != nullptr) {  // split-KV: a partial result for the combine kernel
      store_partial(a, rp, tile, lane, o, inv, lse);
      if constexpr (!T::kEarlyQRelease) {
        named_barrier_sync(T::kBarEpilogue + wg, 128);
        if (tid == 0) mbar_arrive(sm.q_empty());
      }
      return;
    }
    if constexpr (T::kDirectO) {
      store_direct(a, rp, tile, lane, o, inv);
      store_lse(a, rp, tile, lane, lse);
      return;
    }
    // First row of this warpgroup in the sequence.
    const int grow = tile.row0 + wg * 64;
    // Varlen: a TMA store writes all 64 rows of the box, and the rows past
    // this sequence's end are the next sequence's (the map spans the packed
    // rows), so only a warpgroup whose rows all lie inside the sequence takes
    // it; the last, partial one stores from registers, bounded by the
    // sequence (4 bytes per lane and store, where TMA writes whole lines
    // asynchronously). The same for rows before the sequence's start (a
    // first partial tile, tile_scheduler.cuh), padded batches included. And
    // GQA-packed rows, which O's map does not lay out.
    if ((kVarlen && (grow + 64 > tile.seqlen_q || pack > 1)) || grow < 0) {
      store_direct(a, rp, tile, lane, o, inv);
      store_lse(a, rp, tile, lane, lse);
      if constexpr (!T::kEarlyQRelease) {
        // Q's buffer goes back once every warp's wgmmas have read it (a
        // warp's own wait covers only its part).
        named_barrier_sync(T::kBarEpilogue + wg, 128);
        if (tid == 0) mbar_arrive(sm.q_empty());
      }
      return;
    }
    if constexpr (T::kSeparateO) {
      // The previous tile's store must have finished reading the buffer.
      if (tid == 0) tma_store_wait_read();
      named_barrier_sync(T::kBarEpilogue + wg, 128);
    }
    // The buffer was last read through the async proxy (wgmma or TMA store);
    // order these generic-proxy writes after those reads.
    fence_proxy_async_smem();
    const uint32_t base = sm.o() + row0 * 128 + (lane & 3) * 4;
    const uint32_t sw = static_cast<uint32_t>(row0 & 7);  // same for row0 + 8
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      const uint32_t addr =
          base + (j / 8) * kBlockM * 128 + ((static_cast<uint32_t>(j % 8) ^ sw) << 4);
      st_shared_u32(addr, ElementTraits<typename T::OutElement>::pack(o[4 * j] * inv[0],
                                                                      o[4 * j + 1] * inv[0]));
      st_shared_u32(addr + 8 * 128, ElementTraits<typename T::OutElement>::pack(
                                        o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]));
    }
    // Make the st.shared visible to the TMA engine, then let one thread of
    // this warpgroup issue the stores.
    fence_proxy_async_smem();
    named_barrier_sync(T::kBarEpilogue + wg, 128);
    if (tid == 0) {
      if (grow < tile.seqlen_q) {
#pragma unroll
        for (int at = 0; at < T::kOAtoms; ++at) {
          tma_store_4d(&a.tm_o, sm.o() + at * kBlockM * 128 + wg * 64 * 128, at * 64,
                       tile.q_off + grow, tile.head, tile.map_batch);
        }
        tma_store_commit();
      }
      if constexpr (!T::kSeparateO) {
        tma_store_wait_read();
        mbar_arrive(sm.q_empty());
      }
    }
    store_lse(a, rp, tile, lane, lse);
  }

  __device__ static void store_lse(const KernelArgs& a, const RowPlace& rp, const WorkTile& tile, int lane,
                                   const float (&lse)[2]) {
    if (a.lse != nullptr && (lane & 3) == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int g = rp.pos[r];
        if (g < 0 || g >= tile.seqlen_q) continue;
        a.lse[tile.batch * a.lse_batch_stride + rp.head[r] * a.lse_head_stride + tile.q_off + g] = lse[r];
      }
    }
  }

  // Registers -> global, 4 bytes (2 elements) per store; rows outside the
  // sequence skipped (varlen: o_stride_batch is 0, rows are packed).
  __device__ static void store_direct(const KernelArgs& a, const RowPlace& rp, const WorkTile& tile,
                                      int lane, const float (&o)[kHeadDim / 2],
                                      const float (&inv)[2]) {
    using E = ElementTraits<typename T::OutElement>;
    auto* base = static_cast<uint16_t*>(a.out) + tile.batch * a.o_stride_batch + 2 * (lane & 3);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int g = rp.pos[r];
      if (g < 0 || g >= tile.seqlen_q) continue;
      uint16_t* row = base + rp.head[r] * a.o_stride_head + static_cast<int64_t>(tile.q_off + g) * a.o_stride_seq;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        // A head_dim below the tile's (a multiple of 8) ends between 8-column blocks.
        if (8 * j >= a.head_dim) break;
        *reinterpret_cast<uint32_t*>(row + 8 * j) =
            E::pack(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
      }
    }
  }

  // Split-KV: this piece's normalised O and LSE in fp32 (KernelArgs::o_accum,
  // lse_accum), 8 bytes per store; rows outside the sequence skipped.
  __device__ static void store_partial(const KernelArgs& a, const RowPlace& rp, const WorkTile& tile, int lane,
                                       const float (&o)[kHeadDim / 2], const float (&inv)[2],
                                       const float (&lse)[2]) {
    const int64_t rows = static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int g = rp.pos[r];
      if (g < 0 || g >= tile.seqlen_q) continue;
      const int64_t first =
          tile.split * rows + (static_cast<int64_t>(tile.batch) * a.heads_q + rp.head[r]) * a.seqlen_q;
      if ((lane & 3) == 0) a.lse_accum[first + g] = lse[r];
      float* row = a.o_accum + (first + g) * a.head_dim + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        if (8 * j >= a.head_dim) break;
        *reinterpret_cast<float2*>(row + 8 * j) = make_float2(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
      }
    }
  }

  // Before the CTA exits: shared memory must outlive the stores' reads.
  __device__ static void drain(int tid) {
    if (tid == 0) tma_store_wait_read();
  }
};

}  // namespace flashattn::detail::cuda::sm90
