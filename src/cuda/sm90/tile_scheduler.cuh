// Tile scheduler: persistent CTAs, one per SM at most (two for the 64-row
// tile), each walking a sequence of work tiles so that its producer loads the next tile's Q/K/V
// while the consumers finish the current one, and no CTA launch or pipeline
// set-up sits between tiles.
//
// Which tiles a CTA takes: CTA c starts with tile c. Unmasked tiles all cost
// the same, so the rest is a static round robin (c + gridDim.x, ...): the
// CTAs keep in step and the heads in flight stay few. Masked (causal,
// windowed) tiles differ in cost, and a static schedule lets the CTAs drift
// apart over many heads (measured: causal 16k hdim 128 fell from ~600 to
// ~380 TFLOP/s, bench/sm90/NOTES.md); there each CTA claims its next tile
// from a global counter (KernelArgs::tile_counter), so the tiles start in
// their global order, longest first, as they would if the hardware
// dispatched one CTA per tile, but without a CTA's set-up per tile.
//
// Only the producer thread decides: it hands each active tile to the
// consumers through two shared-memory slots (tile_full / tile_empty
// mbarriers), and ends the sequence with kNoTile. So both roles see the same
// tiles (varlen: tiles past a sequence's end are skipped by the producer
// alone) and their barrier phases stay paired.
//
// Work tile t = (m_block, head, batch) with m fastest: the CTAs working at
// the same time share a head's K/V in L2 (at seqlen 16k one head's K/V is
// 8 MB; 132 different heads at once would not fit). With a causal/window
// mask the m order is reversed, so that within a head the query tiles that
// see the most keys start first and the short ones fill the tail.
#pragma once

#include "kernel_args.hpp"
#include "ptx.cuh"

namespace flashattn::detail::cuda::sm90 {

// A work tile and its sequence: row offsets in the TMA maps (varlen: the
// packed rows, whose map batch is 0; KV cache: k_off is the leftpad row of
// the cache entry kv_map_batch), and the sequence's lengths.
//
// row0 is the tile's first query row in its sequence. With a right mask bound
// (KernelArgs::first_tile_partial) the tiles are laid from the sequence's end
// backwards, so that the one partial tile is the first (rows [row0 < 0,
// kBlockM + row0)): there its missing rows cost the fewest key tiles, where
// as the last tile they would cost the most (every warpgroup of a tile visits
// the tile's whole key range). Rows below 0 are loaded as TMA's zero fill
// (padded) or the previous sequence's rows (varlen), fully masked or never
// stored.
//
// GQA packing (KernelArgs::pack_heads): head is the group's first query
// head, and the tile covers `rows` = kBlockM / pack_heads query positions
// from row0.
struct WorkTile {
  int m_block, head, batch, row0;
  int split;  // split-KV piece (KernelArgs::num_splits; 0 without)
  int q_off, k_off, map_batch, kv_map_batch;
  int seqlen_q, seqlen_k;
  int rows;  // query positions per tile: kBlockM, or fewer with GQA packing
  // Varlen: query tiles past the sequence's end have no work (both roles
  // skip them, and count only the others for their barrier phases). Tile m
  // has rows iff m < ceil(seqlen_q / rows), wherever the partial tile is.
  __device__ bool active() const { return m_block * rows < seqlen_q; }
};

struct PersistentTileScheduler {
  static constexpr int kNoTile = -1;

  static dim3 grid(const KernelArgs& a) { return dim3(static_cast<unsigned>(a.grid_ctas)); }

  __device__ static int first() { return static_cast<int>(blockIdx.x); }
  // The tile this CTA takes after t, claimed once t's loads are issued: the
  // producer runs a K/V ring ahead of the consumers, so the claim comes a
  // few key tiles before the CTA can start the next tile and its round trip
  // hides under those. (Claimed when t's loads started instead, a CTA held
  // its next tile through all of t: at 16k tokens causal that cost up to a
  // long tile's time at the end, 3-11%; bench/sm90/NOTES.md.)
  __device__ static int next(const KernelArgs& a, int t) {
    if (a.tile_counter != nullptr) return static_cast<int>(gridDim.x) + atomicAdd(a.tile_counter, 1);
    return t + static_cast<int>(gridDim.x);
  }

  // Producer thread: hand tile t (or kNoTile) to the consumers as the
  // CTA's hand-over number `n`. Slot n % 2's use n / 2 waits for the
  // consumers to have read its use n / 2 - 1 (a fresh barrier's parity 1
  // counts as complete).
  template <class Smem>
  __device__ static void publish(const Smem& sm, uint32_t n, int t) {
    const int slot = static_cast<int>(n & 1);
    mbar_wait(sm.tile_empty(slot), ((n >> 1) & 1) ^ 1);
    st_shared_u32(sm.tile_slot(slot), static_cast<uint32_t>(t));
    mbar_arrive(sm.tile_full(slot));  // release: the store above is visible to the waiters
  }

  // Consumer warp: the tile of hand-over number n. Lane 0 alone reads the
  // slot and gives it back (so its own arrival orders the read before the
  // producer's next write; racecheck flagged the variant in which every
  // lane read and lane 0 arrived after a __syncwarp), then passes the tile
  // to the other lanes.
  template <class Smem>
  __device__ static int receive(const Smem& sm, uint32_t n) {
    const int slot = static_cast<int>(n & 1);
    int t = 0;
    if (threadIdx.x % 32 == 0) {
      mbar_wait(sm.tile_full(slot), (n >> 1) & 1);
      t = static_cast<int>(ld_shared_u32(sm.tile_slot(slot)));
      mbar_arrive(sm.tile_empty(slot));
    }
    return __shfl_sync(0xffffffffu, t, 0);
  }

  template <bool kVarlen, int kBlockM>
  __device__ static WorkTile decode(const KernelArgs& a, int t) {
    // Split-KV (per-sequence kernels only: launch.cuh): the pieces of one
    // query tile are neighbours in the order.
    int split = 0;
    if (kVarlen && a.num_splits > 1) {
      split = t % a.num_splits;
      t /= a.num_splits;
    }
    int m = t % a.num_m_blocks;
    const int hb = t / a.num_m_blocks;
    if (a.longest_first) m = a.num_m_blocks - 1 - m;
    // GQA packing: the tiles walk the KV heads, each taking its group.
    const int pack = kVarlen ? a.pack_heads : 1;
    const int heads = a.heads_q / pack, rows = kBlockM / pack;
    WorkTile w{m,         (hb % heads) * pack, hb / heads, m * rows, split, 0, 0, 0, 0, a.seqlen_q,
               a.seqlen_k, rows};
    if (kVarlen && a.cu_seqlens_q != nullptr) {
      w.q_off = a.cu_seqlens_q[w.batch];
      w.seqlen_q = a.cu_seqlens_q[w.batch + 1] - w.q_off;
      w.k_off = a.cu_seqlens_k[w.batch];
      w.seqlen_k = a.cu_seqlens_k[w.batch + 1] - w.k_off;
    } else {
      w.map_batch = w.kv_map_batch = w.batch;
      if (kVarlen && a.seqused_k != nullptr) {  // KV cache
        if (a.kv_batch_idx != nullptr) w.kv_map_batch = a.kv_batch_idx[w.batch];
        if (a.leftpad_k != nullptr) w.k_off = a.leftpad_k[w.batch];
        w.seqlen_k = a.seqused_k[w.batch] + a.seqlens_k_add - w.k_off;
      }
    }
    if (a.first_tile_partial) w.row0 -= (rows - w.seqlen_q % rows) % rows;
    return w;
  }
};

}  // namespace flashattn::detail::cuda::sm90
